// IAC.md as a pure function of the run store: the active agents on top, then the newest
// finished interactions. Entries do not depend on the clock, so the writer renders each one
// once and keeps it; only the header and the active table are rendered on every write.
import type { JobState } from '../src/jobs/table.js';
import type { JobWorktree } from '../src/jobs/worktree/report.js';
import {
  answeredBy,
  answerTo,
  type AnswerSource,
  type ConversationEntry,
  type Question,
} from '../src/jobs/conversation.js';
import { taskLine } from '../src/lib/text.js';
import { sandboxLabel } from '../src/config/sandbox.js';
import { fence, inline, shorten, table } from './markdown.js';
import type { StoredRecord } from './store.js';
import type { IndexRow } from './store.js';

export const TITLE = '# IAC.md: Inter-Agent Context';
/** The last line of every IAC.md: a file without it was cut short. */
export const END_MARK = '<!-- end of IAC.md -->';

/** Results longer than this are cut in IAC.md (the whole is in the store and `result`). */
export const RESULT_CHARS = 4000;
/** Prompts longer than this are cut in IAC.md (the whole is in the run's prompt.txt). */
export const PROMPT_CHARS = 20_000;
const ERROR_CHARS = 2000;
/** A question, answer or progress line longer than this is cut in IAC.md (the whole: `result`). */
const MESSAGE_CHARS = 1000;

/** Foreign text on one line, cut at `max`. */
const said = (text: string, max = MESSAGE_CHARS) => {
  const { text: kept, cut } = shorten(text, max);
  return inline(kept) + (cut ? ` … (${cut} more characters: \`result\` tool)` : '');
};

const optionsOf = (q: Question) => (q.options ? ` (options: ${q.options.map((o) => said(o, 200)).join(' / ')})` : '');

const asked = (q: Question) => (q.to === 'user' ? 'asked the user' : 'asked');
/** Who answered, when it was not the orchestrator (an answer stored before answers named theirs was its). */
const byWhom = (by: AnswerSource | undefined) => (by && by !== 'orchestrator' ? ` (by ${answeredBy(by)})` : '');

/** The agent's questions, the orchestrator's answers and its progress lines, in order. */
function conversationLines(entries: readonly ConversationEntry[]): string[] {
  return entries.map((e) => {
    const at = time(e.at);
    if (e.kind === 'progress') return `- ${at} · progress: ${said(e.text)}`;
    if (e.kind === 'answer') return `- ${at} · **answered** \`${inline(e.messageId)}\`${byWhom(e.by)}: ${said(e.text)}`;
    const never = answerTo(entries, e.messageId) ? '' : ' · _never answered_';
    return `- ${at} · **${asked(e)}** \`${inline(e.messageId)}\`: ${said(e.text)}${optionsOf(e)}${never}`;
  });
}

const STATUS: Record<JobState, string> = {
  queued: '⏳ queued',
  running: '▶️ running',
  succeeded: '✅ succeeded',
  failed: '❌ failed',
  timed_out: '⏱️ timed out',
  cancelled: '🚫 cancelled',
  interrupted: '⚠️ interrupted',
};

export const statusLabel = (state: JobState) => STATUS[state] ?? state;

/**
 * 12,345: one formatter, made at first use (toLocaleString makes one per call, the costliest part
 * of an entry). Not at load: the first Intl object a process makes costs some 20 ms
 * here (ICU's data), which a start that renders no entry need not pay.
 */
let counts: Intl.NumberFormat | undefined;
const count = (n: number) => (counts ??= new Intl.NumberFormat('en-US')).format(n);

/** "2026-05-01 12:00:03Z" */
export function time(iso: string | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? '—' : `${d.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

export function duration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

const between = (from?: string, to?: string) => (from && to ? Date.parse(to) - Date.parse(from) : undefined);

function cost(r: StoredRecord): string {
  const o = r.outcome;
  const parts: string[] = [];
  if (o?.costUsd !== undefined)
    parts.push(`$${o.costUsd.toFixed(o.costUsd < 0.01 ? 6 : 4)}${o.costSource === 'estimated' ? ' (estimated)' : ''}`);
  if (o?.premiumRequests !== undefined)
    parts.push(`${o.premiumRequests} premium request${o.premiumRequests === 1 ? '' : 's'}`);
  return parts.join(', ') || '—';
}

function tokens(r: StoredRecord): string {
  const u = r.outcome?.usage;
  return u ? `${u.inputTokens} in / ${u.outputTokens} out / ${u.cachedInputTokens} cached` : '—';
}

/** Files listed in an entry's worktree section; the rest are counted (`result` lists them all). */
export const WORKTREE_FILES = 20;

/**
 * Where an isolated agent worked, and what its branch changes. File names are the agent's: escaped
 * as text, never in a code span (a backtick in one would close it).
 */
function worktreeLines(w: JobWorktree): string[] {
  const c = w.changes;
  const where = !c
    ? `in ${inline(w.path)}`
    : c.removed
      ? 'no changes: worktree and branch removed'
      : `${inline(c.diffStat)}; kept in ${inline(w.path)} until integrated or discarded`;
  const out = [`**Worktree:** branch ${inline(w.branch)} from \`${w.base.slice(0, 10)}\` · ${where}`];
  if (c?.files.length) {
    const left = new Set(c.uncommitted);
    out.push('');
    for (const file of c.files.slice(0, WORKTREE_FILES))
      out.push(`- ${inline(file)}${left.has(file) ? ' (left uncommitted; committed by polyspawn)' : ''}`);
    if (c.files.length > WORKTREE_FILES) out.push(`- … and ${c.files.length - WORKTREE_FILES} more (\`result\` tool)`);
  }
  for (const note of w.notes ?? []) out.push('', `_${said(note)}_`);
  return out;
}

type EntryContext = {
  /** How to point at the run's folder from IAC.md, e.g. ".polyspawn/runs/abc123". */
  runPath: (id: string) => string;
};

/** One finished interaction. */
export function renderEntry(r: StoredRecord, ctx: EntryContext): string {
  const run = ctx.runPath(r.id);
  const out: string[] = [];
  // A team's entry links its members' entries.
  if (r.team) out.push(`<a id="agent-${r.id}"></a>`, '');
  out.push(`### \`${r.id}\` · ${inline(r.backend)} / ${inline(r.model)} · ${statusLabel(r.state)}`);
  out.push('');
  out.push(
    table(
      ['Started', 'Duration', 'Tokens', 'Cost'],
      // An interrupted job's end is when a later server found it, not when it stopped.
      [
        [
          time(r.startedAt ?? r.createdAt),
          r.state === 'interrupted' ? '—' : duration(between(r.startedAt, r.endedAt)),
          tokens(r),
          cost(r),
        ],
      ],
    ),
  );
  out.push('');
  out.push(`**Task:** ${inline(taskLine(r.prompt)) || '—'}`);
  out.push(...budgetLines(r));
  out.push('');
  if (r.team) out.push(`**Team:** \`${inline(r.team.id)}\` · ${inline(r.team.role)} · ${inline(r.team.member)}`, '');
  if (r.sandbox) out.push(`**Sandbox:** ${inline(sandboxLabel(r.sandbox))}`, '');
  const prompt = shorten(r.prompt, PROMPT_CHARS);
  out.push('<details>');
  out.push(`<summary>Prompt (${count(r.prompt.length)} characters)</summary>`);
  out.push('');
  out.push(fence(prompt.text));
  if (prompt.cut) out.push('', `_Cut: ${count(prompt.cut)} more characters in \`${inline(run)}/prompt.txt\`._`);
  out.push('');
  out.push('</details>');
  const text = r.outcome?.text ?? '';
  if (text !== '') {
    const result = shorten(text, RESULT_CHARS);
    out.push('', '**Result:**', '', fence(result.text));
    if (result.cut) {
      out.push(
        '',
        `_Cut: ${count(result.cut)} more characters. The whole answer: the \`result\` tool with agent_id \`${r.id}\`; the CLI's output: \`${inline(run)}/stdout.log\` (or the \`logs\` tool)._`,
      );
    }
  }
  if (r.worktree) out.push('', ...worktreeLines(r.worktree));
  if (r.conversation?.length) {
    out.push('', '**Conversation with the orchestrator:**', '', ...conversationLines(r.conversation));
  }
  if (r.state !== 'succeeded' && r.outcome?.error) {
    const error = shorten(r.outcome.error, ERROR_CHARS);
    out.push(
      '',
      '**Error:**',
      '',
      fence(error.text + (error.cut ? `\n… (${error.cut} more characters: \`result\` tool)` : '')),
    );
  }
  return out.join('\n');
}

/** A job that passed its budget says so under its task: which limit, and whether it was stopped for it. */
function budgetLines(r: StoredRecord): string[] {
  const kind = r.outcome?.budgetExceeded;
  if (!kind) return [];
  const limit = kind === 'turns' ? `max_turns (${r.maxTurns ?? '?'})` : `max_budget_usd (${r.maxBudgetUsd ?? '?'})`;
  const how = r.state === 'succeeded' ? 'seen once it had finished' : 'stopped';
  return ['', `**Budget:** passed ${limit}: ${how}`];
}

export type ActiveRow = Pick<IndexRow, 'id' | 'state' | 'backend' | 'model' | 'task' | 'createdAt' | 'startedAt'> & {
  /** A running agent's unanswered questions and newest progress line (from its record). */
  questions?: Question[];
  progress?: { text: string; at: string };
};

type DocumentParts = {
  now: number;
  active: ActiveRow[];
  /** Rendered entries, newest first. */
  entries: string[];
  /** Rendered teams, newest first (iac/render-team.ts). */
  teams?: string[];
  totalFinished: number;
  storePath: string;
};

export function renderDocument(d: DocumentParts): string {
  const out: string[] = [TITLE, ''];
  out.push('<!-- Written by polyspawn from its run store; rewritten on every change: do not edit by hand. -->');
  out.push('');
  out.push(
    `_Updated ${time(new Date(d.now).toISOString())}. ${d.active.length} active; ` +
      `${d.entries.length} of ${d.totalFinished} finished interactions shown, newest first. ` +
      `Every run is kept in \`${inline(d.storePath)}\`._`,
  );
  out.push('', '## Active Agents', '');
  if (d.active.length === 0) out.push('_No agents running or queued._');
  else {
    const rows = d.active.map((a) => [
      `\`${a.id}\``,
      statusLabel(a.state),
      inline(a.backend),
      inline(a.model),
      inline(a.task) || '—',
      time(a.startedAt),
      a.startedAt ? duration(d.now - Date.parse(a.startedAt)) : `queued ${duration(d.now - Date.parse(a.createdAt))}`,
    ]);
    out.push(table(['Agent', 'Status', 'Backend', 'Model', 'Task', 'Started', 'Elapsed'], rows));
    const waiting = d.active.flatMap((a) =>
      (a.questions ?? []).map(
        (q) =>
          `- \`${a.id}\` asks${q.to === 'user' ? ' the user' : ''} \`${inline(q.messageId)}\` (${time(q.at)}): ${said(q.text)}${optionsOf(q)}`,
      ),
    );
    if (waiting.length)
      out.push('', '**Waiting for the orchestrator** (it answers with `reply_subagent`):', '', ...waiting);
    const progress = d.active.flatMap((a) =>
      a.progress ? [`- \`${a.id}\` (${time(a.progress.at)}): ${said(a.progress.text)}`] : [],
    );
    if (progress.length) out.push('', '**Progress:**', '', ...progress);
  }
  if (d.teams?.length) out.push('', '## Teams', '', d.teams.join('\n\n---\n\n'));
  out.push('', '## Interaction History', '');
  if (d.entries.length === 0) out.push('_No finished interactions yet._');
  else out.push(d.entries.join('\n\n---\n\n'));
  out.push('', END_MARK, '');
  return out.join('\n');
}
