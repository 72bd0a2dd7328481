// One line of index.jsonl, and how a line read back is checked. The index is read from disk that
// others can write (a cloned repository's .polyspawn, a crash, a full disk): a line is a run's
// only when it passes the schema; anything else is damaged, skipped and counted, never a run.
import { z } from 'zod';
import { JOB_ID, JOB_STATES, type JobState } from '../src/jobs/table.js';

/** Past this a line is damaged unread: the store's own lines are a few hundred bytes (the task is 80 characters). */
const MAX_INDEX_LINE_CHARS = 16 * 1024;
const LINE_START = '{"id":';
const time = () => z.string().max(64);
const count = () => z.number().int().nonnegative();

/** One line of index.jsonl. Keys are short: the index holds a line per state change. */
const indexLineSchema = z.object({
  id: z.string().regex(JOB_ID),
  st: z.enum(JOB_STATES),
  /** backend, model, task (first line of the prompt, shortened, redacted) */
  b: z.string().max(200),
  m: z.string().max(200),
  t: z.string().max(1024),
  /** created, started, ended (ISO) */
  c: time(),
  s: time().optional(),
  e: time().optional(),
  /** cost in USD and where it came from; input and output tokens */
  usd: z.number().nonnegative().finite().optional(),
  cs: z.enum(['reported', 'estimated', 'unknown']).optional(),
  in: count().optional(),
  out: count().optional(),
  /** the owning server's pid and start, on queued and running lines */
  p: z.number().int().positive().optional(),
  ps: z.string().max(64).optional(),
});
export type IndexLine = z.infer<typeof indexLineSchema>;

/**
 * A line of index.jsonl read back: the run's line, if it holds one, and whether something in it
 * is damaged. A line torn by a crash has the next line glued to it: that next line is recovered
 * from where it starts ({"id": appears nowhere else: quotes in values are escaped).
 */
export function readIndexLine(raw: string): { line?: IndexLine; text?: string; damaged: boolean } {
  if (raw === '') return { damaged: false };
  if (raw.length > MAX_INDEX_LINE_CHARS) return { damaged: true };
  const whole = parseIndexLine(raw);
  if (whole) return { line: whole, text: raw, damaged: false };
  const glued = raw.lastIndexOf(LINE_START);
  const text = glued > 0 ? raw.slice(glued) : undefined;
  const line = text === undefined ? undefined : parseIndexLine(text);
  return line ? { line, text, damaged: true } : { damaged: true };
}

const QUICK = new RegExp(`^\\{"id":"(${JOB_ID.source.slice(1, -1)})","st":"(${JOB_STATES.join('|')})",`);

/**
 * The id and state of a line of the shape the store writes (they are its first two keys), read
 * with one regular expression: the rest is checked whole (readIndexLine) when the line is used.
 * Undefined for any other line (read it whole).
 */
export function quickKey(raw: string): { id: string; st: JobState } | undefined {
  if (raw.length > MAX_INDEX_LINE_CHARS || !raw.endsWith('}') || raw.indexOf(LINE_START, 1) >= 0) return undefined;
  const m = QUICK.exec(raw);
  return m ? { id: m[1]!, st: m[2] as JobState } : undefined;
}

function parseIndexLine(text: string): IndexLine | undefined {
  try {
    const parsed = indexLineSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The damaged lines a reader skipped in one file: how many, and the first ones' numbers (1-based). */
export class DamagedLines {
  count = 0;
  readonly numbers: number[] = [];

  add(lineNumber: number): void {
    this.count++;
    if (this.numbers.length < 20) this.numbers.push(lineNumber);
  }

  /** "index.jsonl: 2 damaged lines skipped (lines 3, 7)", or undefined when none. */
  describe(file: string): string | undefined {
    if (!this.count) return undefined;
    const more = this.count > this.numbers.length ? ', …' : '';
    return `${file}: ${this.count} damaged line${this.count === 1 ? '' : 's'} skipped (line${this.numbers.length === 1 ? '' : 's'} ${this.numbers.join(', ')}${more})`;
  }
}
