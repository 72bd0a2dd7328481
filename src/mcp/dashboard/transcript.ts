// An agent's run as a transcript: its stdout, read a chunk at a time, cut into lines, each line
// turned into neutral entries by its backend's `transcript()` (backends/), the entries folded into
// steps (a command and later its exit code are one step), each step rendered to HTML here, on the
// server. The page's script only puts a step's HTML in place: a step it has already shown is
// replaced (same element id), a new one appended. Every text of the run goes through `esc` or the
// Markdown renderer, which escapes HTML.
import type { StepStatus, TranscriptEntry } from '../../../backends/types.js';
import { CONVERSATION_LIMITS } from '../../jobs/conversation.js';
import { Steps, type Step } from '../../jobs/process/transcript-steps.js';
import { esc } from './html.js';
import { diffLines, markdown } from './markdown.js';

/** What rendering a step needs of the job: its id, the answer given to a question, a question still open. */
type StepContext = {
  jobId: string;
  answerOf(messageId: string): string | undefined;
  /** The open question with this text, for the answer form in its place. */
  openQuestion(text: string): string | undefined;
};

/** A line longer than this (a tool's huge result) is skipped, and said so, rather than held. */
const MAX_LINE_CHARS = 8 * 1024 * 1024;
/** The end of a command's or tool's output that a step shows (the log has all of it). */
const OUTPUT_TAIL_LINES = 30;
const OUTPUT_TAIL_CHARS = 4000;
const INPUT_CHARS = 2000;
/** An edit larger than this on either side shows its size, not its diff (a diff costs time). */
const DIFF_INPUT_CHARS = 200_000;
const DIFF_LINES = 400;
/** Unchanged lines kept around each change in an edit's diff. */
const CONTEXT_LINES = 3;

export type RenderedStep = { id: string; html: string };

/**
 * One agent's stdout becoming rendered steps: `push` each chunk of text as it is read (whole
 * lines or not), `end` once the log has no more. Holds the open steps and one unfinished line.
 */
export class TranscriptStream {
  private readonly steps = new Steps();
  /** The unfinished line's pieces, joined once its end comes (joining each time would copy it over and over). */
  private pending: string[] = [];
  private pendingChars = 0;
  private skipping = false;
  private rawSteps = 0;
  /** The last notice shown: an error that repeats it (codex's error event, then turn.failed) takes its place. */
  private lastNotice: { n: number; text: string } | undefined;
  /** Questions still waiting, as last rendered: a question reaches the job after the CLI logs its call. */
  private readonly asking = new Map<number, { step: Step; html: string }>();

  constructor(
    private readonly parse: (record: Record<string, unknown>) => TranscriptEntry[],
    private readonly context: StepContext,
  ) {}

  push(text: string): RenderedStep[] {
    const lines = text.split('\n');
    const last = lines.pop()!;
    const out: (Step | RenderedStep)[] = [];
    if (lines.length) {
      lines[0] = this.pending.join('') + lines[0];
      this.pending = [];
      this.pendingChars = 0;
      out.push(...lines.flatMap((line) => this.line(line)));
    }
    this.hold(last);
    if (this.pendingChars > MAX_LINE_CHARS) out.push(this.skipLine());
    return this.rendered(out);
  }

  /** Keeps a piece of the unfinished line, unless that line is one being left out. */
  private hold(piece: string): void {
    if (this.skipping || !piece) return;
    this.pending.push(piece);
    this.pendingChars += piece.length;
  }

  private skipLine(): RenderedStep {
    this.pending = [];
    this.pendingChars = 0;
    this.skipping = true;
    return this.notice(`a line longer than ${MAX_LINE_CHARS / 1024 / 1024} MiB was left out (it is in the log)`);
  }

  end(): RenderedStep[] {
    const last = this.pending.join('');
    this.pending = [];
    this.pendingChars = 0;
    return this.rendered(this.line(last));
  }

  private line(line: string): (Step | RenderedStep)[] {
    if (this.skipping) {
      // The rest of a line too long to hold.
      this.skipping = false;
      return [];
    }
    const trimmed = line.trim();
    if (!trimmed) return [];
    let record: unknown;
    try {
      record = JSON.parse(trimmed);
    } catch {
      record = undefined;
    }
    if (!record || typeof record !== 'object' || Array.isArray(record)) {
      // Not one of the CLI's events: shown as it is.
      return [{ id: `raw-${this.rawSteps++}`, html: `<pre class="step raw">${esc(clipLines(trimmed))}</pre>` }];
    }
    return this.parse(record as Record<string, unknown>).flatMap((entry) => {
      const repeats = entry.kind === 'error' && this.lastNotice?.text === entry.text;
      const step = repeats ? { n: this.lastNotice!.n, entry } : this.steps.add(entry);
      if (!step) return [];
      this.lastNotice = entry.kind === 'notice' ? { n: step.n, text: entry.text } : undefined;
      // A message streamed in pieces is rendered once the lines read together are done.
      return ['continues' in entry && entry.continues ? step : this.render(step)];
    });
  }

  private render(step: Step): RenderedStep {
    const html = renderStep(step, this.context);
    if (isAsking(step.entry)) this.asking.set(step.n, { step, html });
    else this.asking.delete(step.n);
    return { id: `step-${step.n}`, html };
  }

  /** The lines' steps, rendered: a message's pieces in a row render it once (a long message streamed in small pieces would render it over and over). */
  private rendered(items: (Step | RenderedStep)[]): RenderedStep[] {
    return items
      .filter((item, i) => !('n' in item) || items[i + 1] !== item)
      .map((item) => ('n' in item ? this.render(item) : item));
  }

  /** The waiting questions whose rendering changed since (asked of the job, or answered): read while the log is quiet. */
  refresh(): RenderedStep[] {
    return [...this.asking.values()].flatMap((shown) => {
      const html = renderStep(shown.step, this.context);
      if (html === shown.html) return [];
      shown.html = html;
      return [{ id: `step-${shown.step.n}`, html }];
    });
  }

  private notice(text: string): RenderedStep {
    return { id: `raw-${this.rawSteps++}`, html: `<p class="step notice">${esc(text)}</p>` };
  }
}

const isAsking = (entry: Step['entry']) =>
  entry.kind === 'tool' && entry.name === 'ask_parent' && entry.status === 'running';

/** The end of a long output: its last lines, at most so many characters. */
function clipLines(text: string): string {
  const lines = text.replace(/\s+$/, '').split('\n');
  let tail = lines.slice(-OUTPUT_TAIL_LINES).join('\n');
  if (tail.length > OUTPUT_TAIL_CHARS) tail = tail.slice(-OUTPUT_TAIL_CHARS);
  const cut = tail.length < text.trimEnd().length;
  return cut ? `… (the start is in the log)\n${tail}` : tail;
}

const clip = (text: string, chars: number) => (text.length > chars ? `${text.slice(0, chars)}…` : text);

function statusBadge(status: StepStatus, exitCode?: number): string {
  if (status === 'running') return '<span class="badge running">running</span>';
  const label = exitCode !== undefined ? `exit ${exitCode}` : status === 'ok' ? 'done' : 'failed';
  return `<span class="badge ${status}">${esc(label)}</span>`;
}

function diffHtml(before: string, after: string): string {
  if (before.length > DIFF_INPUT_CHARS || after.length > DIFF_INPUT_CHARS)
    return `<p class="empty">${before.length} characters replaced by ${after.length} (too large to show here)</p>`;
  const parts = diffLines(before, after);
  if (!parts)
    return `<p class="empty">rewritten: too many lines changed to show here (${before.length} characters replaced by ${after.length})</p>`;
  const rows: string[] = [];
  for (const part of parts) {
    const lines = part.value.replace(/\n$/, '').split('\n');
    if (part.added || part.removed) {
      const [sign, cls] = part.added ? ['+', 'ins'] : ['-', 'del'];
      for (const line of lines) rows.push(`<span class="${cls}">${sign} ${esc(line)}</span>`);
      continue;
    }
    // Unchanged: a few lines either side of a change, the rest folded.
    const head = rows.length ? lines.slice(0, CONTEXT_LINES) : [];
    const tail = lines.slice(Math.max(head.length, lines.length - CONTEXT_LINES));
    const folded = lines.length - head.length - tail.length;
    for (const line of head) rows.push(`<span class="ctx">  ${esc(line)}</span>`);
    if (folded > 0) rows.push(`<span class="fold">  … ${folded} unchanged line${folded === 1 ? '' : 's'}</span>`);
    for (const line of tail) rows.push(`<span class="ctx">  ${esc(line)}</span>`);
  }
  const shown = rows.slice(0, DIFF_LINES);
  if (rows.length > shown.length) shown.push(`<span class="fold">… ${rows.length - shown.length} more lines</span>`);
  return `<pre class="diff">${shown.join('')}</pre>`;
}

/** A unified diff as the CLI gave it, each line marked by its first character. */
function unifiedDiffHtml(diff: string): string {
  const lines = diff.split('\n');
  const rows = lines.slice(0, DIFF_LINES).map((line) => {
    const cls = line.startsWith('+') ? 'ins' : line.startsWith('-') ? 'del' : line.startsWith('@@') ? 'fold' : 'ctx';
    return `<span class="${cls}">${esc(line)}</span>`;
  });
  if (lines.length > rows.length) rows.push(`<span class="fold">… ${lines.length - rows.length} more lines</span>`);
  return `<pre class="diff">${rows.join('')}</pre>`;
}

const CHANGE_LABEL = { add: 'created', update: 'edited', delete: 'deleted', write: 'wrote' } as const;

/** A field of a tool's JSON input or output, or undefined. */
function jsonField(text: string | undefined, key: string): unknown {
  try {
    const value: unknown = JSON.parse(text ?? '');
    return value && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
  } catch {
    return undefined;
  }
}

/** The channel's tools (src/mcp/channel/tools.ts) read as what they are: a question, its answer, a progress line. */
function channelStep(entry: Extract<TranscriptEntry, { kind: 'tool' }>, context: StepContext): string | undefined {
  if (entry.name === 'report_progress') {
    return `<p class="step progress">progress: ${esc(String(jsonField(entry.input, 'text') ?? ''))}</p>`;
  }
  if (entry.name !== 'ask_parent' && entry.name !== 'check_message_status') return undefined;
  const messageId = jsonField(entry.output, 'message_id') ?? jsonField(entry.input, 'message_id');
  const given = jsonField(entry.output, 'answer');
  const answer =
    typeof given === 'string' ? given : typeof messageId === 'string' ? context.answerOf(messageId) : undefined;
  const question = jsonField(entry.input, 'question');
  const options = jsonField(entry.input, 'options');
  const asked =
    entry.name === 'ask_parent'
      ? `<p><b>Asked you:</b> ${esc(String(question ?? ''))}${Array.isArray(options) && options.length ? ` <i>(${options.map(esc).join(' / ')})</i>` : ''}</p>`
      : `<p><b>Waited again for your answer</b>${typeof messageId === 'string' ? ` to ${esc(messageId)}` : ''}</p>`;
  const open = typeof question === 'string' && answer === undefined ? context.openQuestion(question) : undefined;
  const reply =
    answer !== undefined
      ? `<p><b>Answer:</b> ${esc(answer)}</p>`
      : open !== undefined
        ? `<form method="post" action="/agents/${esc(context.jobId)}/reply"><input type="hidden" name="message_id" value="${esc(open)}"><input name="answer" required maxlength="${CONVERSATION_LIMITS.answerChars}" placeholder="your answer" aria-label="your answer to: ${esc(question)}"> <button type="submit">Answer</button> <span class="empty">it waits for the answer</span></form>`
        : entry.status === 'running'
          ? '<p class="empty">waiting for the answer</p>'
          : '<p class="empty">no answer yet: it went on without one</p>';
  return `<div class="step question">${asked}${reply}</div>`;
}

function renderStep(step: Step, context: StepContext): string {
  const id = `step-${step.n}`;
  const entry = step.entry;
  switch (entry.kind) {
    case 'message':
      return `<div class="step message" id="${id}">${markdown(entry.text)}</div>`;
    case 'reasoning':
      return `<details class="step reasoning" id="${id}"><summary>thinking</summary><p>${esc(clip(entry.text, OUTPUT_TAIL_CHARS))}</p></details>`;
    case 'command': {
      const output = entry.output ? `<pre class="output">${esc(clipLines(entry.output))}</pre>` : '';
      return `<details class="step command ${entry.status}" id="${id}" open><summary><code>$ ${esc(clip(entry.command, INPUT_CHARS))}</code> ${statusBadge(entry.status, entry.exitCode)}</summary>${output || '<p class="empty">no output</p>'}</details>`;
    }
    case 'edit': {
      const body =
        entry.diff !== undefined
          ? unifiedDiffHtml(entry.diff)
          : entry.before !== undefined || entry.after !== undefined
            ? diffHtml(entry.before ?? '', entry.after ?? '')
            : '<p class="empty">the CLI does not report the change itself: the review of its worktree shows it</p>';
      return `<details class="step edit ${entry.status}" id="${id}" open><summary>${CHANGE_LABEL[entry.change]} <code>${esc(entry.path)}</code> ${statusBadge(entry.status)}</summary>${body}</details>`;
    }
    case 'tool': {
      const channel = channelStep(entry, context);
      if (channel) return channel.replace('class="step', `id="${id}" class="step`);
      const output = entry.output ? `<pre class="output">${esc(clipLines(entry.output))}</pre>` : '';
      return `<details class="step tool ${entry.status}" id="${id}"><summary>tool <code>${esc(entry.server ? `${entry.server}/${entry.name}` : entry.name)}</code> ${statusBadge(entry.status)}</summary><pre class="input">${esc(clip(entry.input ?? '', INPUT_CHARS))}</pre>${output}</details>`;
    }
    case 'plan': {
      const mark = { completed: '☑', in_progress: '▶', pending: '☐' } as const;
      const items = entry.items
        .map(
          (item) =>
            `<li class="${item.status}"><span aria-hidden="true">${mark[item.status]}</span> ${esc(item.text)}<span class="sr"> (${item.status.replace('_', ' ')})</span></li>`,
        )
        .join('');
      return `<div class="step plan" id="${id}"><b>Plan</b><ul>${items}</ul></div>`;
    }
    case 'notice':
      return `<p class="step notice" id="${id}">${esc(entry.text)}</p>`;
    case 'error':
      return `<p class="step error" id="${id}" role="alert">${esc(entry.text)}</p>`;
  }
}
