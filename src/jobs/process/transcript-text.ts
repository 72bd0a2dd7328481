// A page of a CLI's JSON-lines log as plain readable text, through its backend's transcript():
// what `logs` gives with `readable: true` (the dashboard renders the same entries as HTML).
import type { TranscriptEntry } from '../../../backends/types.js';
import { Steps, type Step } from './transcript-steps.js';

/** What one step may show of a command's output, a tool's input or an edit's text. */
const STEP_CHARS = 2000;
const OUTPUT_LINES = 30;

const clip = (text: string, chars = STEP_CHARS) => (text.length > chars ? `${text.slice(0, chars)}…` : text);
const lastLines = (text: string) => clip(text.split('\n').slice(-OUTPUT_LINES).join('\n'));
const indented = (text: string) => text.replace(/^/gm, '    ');
/** A command's or tool's output, its last lines indented below its line; nothing without one. */
const outputBelow = (output: string | undefined) => (output ? `\n${indented(lastLines(output))}` : '');
const status = (s: 'running' | 'ok' | 'failed', exitCode?: number) =>
  s === 'running' ? 'running' : `${s}${exitCode !== undefined ? ` (exit ${exitCode})` : ''}`;
const PLAN_MARK = { pending: '[ ]', in_progress: '[~]', completed: '[x]' } as const;

/** One entry as text: a line that says what it is, and its content indented below. */
function entryText(entry: TranscriptEntry): string {
  switch (entry.kind) {
    case 'message':
      return `message: ${entry.text}`;
    case 'reasoning':
      return `thinking: ${entry.text}`;
    case 'command':
      return `$ ${clip(entry.command)}  [${status(entry.status, entry.exitCode)}]${outputBelow(entry.output)}`;
    case 'edit': {
      const change =
        entry.diff ??
        [entry.before && `--- before\n${entry.before}`, entry.after && `+++ after\n${entry.after}`]
          .filter(Boolean)
          .join('\n');
      return `${entry.change} ${entry.path}  [${status(entry.status)}]${change ? `\n${indented(clip(change))}` : ''}`;
    }
    case 'tool': {
      const name = entry.server ? `${entry.server}.${entry.name}` : entry.name;
      const input = entry.input ? ` ${clip(entry.input, 200)}` : '';
      return `tool ${name}${input}  [${status(entry.status)}]${outputBelow(entry.output)}`;
    }
    case 'plan':
      return `plan:\n${entry.items.map((i) => `  ${PLAN_MARK[i.status]} ${i.text}`).join('\n')}`;
    case 'notice':
      return `note: ${entry.text}`;
    case 'error':
      return `error: ${entry.text}`;
    case 'done':
      return `  ↳ ${status(entry.status, entry.exitCode)}${outputBelow(entry.output)}`;
  }
}

/**
 * The text of a page of JSON lines: its entries folded into steps as the dashboard folds them
 * (./transcript-steps.ts), in order; a line that is not JSON is shown as it is, one the
 * transcript passes over (only bookkeeping) not at all, and the outcome of a step begun before
 * the page on a line of its own.
 */
export function transcriptText(
  page: string,
  transcript: (record: Record<string, unknown>) => TranscriptEntry[],
): string {
  const steps = new Steps();
  /** What the page shows, in order: a step (shown as it ends up), or a line of text. */
  const shown: (Step | string)[] = [];
  const added = new Set<Step>();
  for (const line of page.split('\n')) {
    if (!line.trim()) continue;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      shown.push(line);
      continue;
    }
    if (typeof record !== 'object' || record === null || Array.isArray(record)) continue;
    for (const entry of transcript(record as Record<string, unknown>)) {
      const step = steps.add(entry);
      if (!step) {
        if (entry.kind === 'done') shown.push(entryText(entry));
      } else if (!added.has(step)) {
        added.add(step);
        shown.push(step);
      }
    }
  }
  return shown.map((item) => (typeof item === 'string' ? item : entryText(item.entry))).join('\n');
}
