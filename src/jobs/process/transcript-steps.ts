// A run's transcript entries (from its backend's transcript(), backends/) folded into steps: a
// command and, later, its exit code are one step; a tool call's updates replace it; a message
// streamed in pieces is one message. The dashboard renders the steps as HTML, `logs` with
// `readable: true` as text (./transcript-text.ts): both show the same steps.
import type { TranscriptEntry } from '../../../backends/types.js';

export type Step = { n: number; entry: Exclude<TranscriptEntry, { kind: 'done' }> };

/** Steps still waiting for their outcome, at most: past it the oldest is forgotten (shown as it was). */
const OPEN_STEPS = 1000;
/** A message streamed in pieces shows up to this much (each piece renders it again). */
const MAX_JOINED_CHARS = 100_000;

/**
 * Folds entries into steps: an entry with the id of an open step replaces it, a `done` completes
 * it, a piece that `continues` a message joins the message step just before.
 */
export class Steps {
  private readonly open = new Map<string, Step>();
  private count = 0;
  private last: Step | undefined;

  /** The step an entry adds or changes; none for the outcome of a step never seen, or a piece past a message's length. */
  add(entry: TranscriptEntry): Step | undefined {
    if (entry.kind !== 'done') {
      const joined = this.join(entry);
      if (joined !== 'separate') return joined;
    }
    const step = this.addStep(entry);
    if (step && entry.kind !== 'done') this.last = step;
    return step;
  }

  /** A piece joined to the message step before it (undefined past MAX_JOINED_CHARS: the log has the rest). */
  private join(entry: Exclude<TranscriptEntry, { kind: 'done' }>): Step | undefined | 'separate' {
    const before = this.last?.entry;
    if (!('continues' in entry) || !entry.continues || before?.kind !== entry.kind) return 'separate';
    if (before.text.length >= MAX_JOINED_CHARS) return undefined;
    const text = before.text + entry.text;
    this.last!.entry = {
      kind: entry.kind,
      text: text.length > MAX_JOINED_CHARS ? `${text.slice(0, MAX_JOINED_CHARS)}… (the rest is in the log)` : text,
    };
    return this.last;
  }

  private addStep(entry: TranscriptEntry): Step | undefined {
    if (entry.kind === 'done') {
      const step = this.open.get(entry.id);
      if (!step || !('status' in step.entry)) return undefined;
      const { kind: _kind, id: _id, ...outcome } = entry;
      step.entry = { ...step.entry, ...outcome };
      return step;
    }
    const id = 'id' in entry ? entry.id : undefined;
    const earlier = id === undefined ? undefined : this.open.get(id);
    if (earlier) {
      earlier.entry = entry;
      return earlier;
    }
    const step = { n: this.count++, entry };
    if (id !== undefined) {
      this.open.set(id, step);
      if (this.open.size > OPEN_STEPS) this.open.delete(this.open.keys().next().value!);
    }
    return step;
  }
}
