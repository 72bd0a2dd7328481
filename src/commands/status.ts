// `polyspawn status`: the active agents and the newest history of the project's run store (every
// server's and `polyspawn run`'s jobs), as tables for a terminal. It only reads.
import { backends as allBackends } from '../../backends/registry.js';
import { sameProcessAlive, selfIdentity } from '../lib/proc.js';
import { Redactor } from '../lib/redact.js';
import { duration, time } from '../../iac/render.js';
import { indexRow, RunStore, type IndexRow } from '../../iac/store.js';
import { TeamFiles } from '../../iac/teams.js';
import type { TeamRecord } from '../jobs/teams/record.js';
import { taskLine } from '../lib/text.js';
import { loadConfig } from '../config/config.js';
import type { JobState } from '../jobs/table.js';
import { leftoverWorktrees, type LeftoverWorktree } from '../jobs/worktree/worktree.js';
import { InputError } from '../lib/errors.js';
import { cell, parseCommandArgs, textTable, type CommandIo } from './io.js';

const DEFAULT_STATUS_LIMIT = 10;

type StatusRow = IndexRow & {
  /** A queued or running job whose server is no longer running (the next server marks it interrupted). */
  orphaned?: boolean;
};

/** A worktree polyspawn left in the project (kept for its changes, or by a run that was interrupted). */
export type KeptWorktree = LeftoverWorktree & {
  /** Its job's state, when the store knows the job. */
  state?: JobState;
  /** Its job's record is damaged, and the index does not know it either. */
  damaged?: true;
  /** How many files its branch changes, once its job ended. */
  changedFiles?: number;
};

export type Status = {
  stateDir: string;
  active: StatusRow[];
  history: StatusRow[];
  finished: number;
  worktrees: KeptWorktree[];
  /** The newest teams (run_team), each with whether its server is gone while it says running. */
  teams: (TeamSummaryRow & { orphaned?: boolean })[];
};

type TeamSummaryRow = Pick<TeamRecord, 'id' | 'state' | 'createdAt' | 'endedAt'> & {
  topology: string;
  members: number;
  task: string;
};

/** The worktrees left in the project, each with what the store says of its job. */
export function keptWorktrees(store: RunStore): KeptWorktree[] {
  return leftoverWorktrees(store.dir).map((w) => {
    let record;
    try {
      record = store.get(w.id);
    } catch {
      return { ...w, damaged: true as const };
    }
    const files = record?.worktree?.changes?.files.length;
    return {
      ...w,
      state: record?.state,
      changedFiles: files,
    };
  });
}

/** One line per kept worktree, for a terminal. */
export function worktreeLines(worktrees: readonly KeptWorktree[]): string[] {
  return worktrees.map(
    (w) =>
      `${w.id}  ${w.state ?? (w.damaged ? 'damaged record' : 'unknown agent')}${w.changedFiles !== undefined ? `, ${w.changedFiles} files changed` : ''}  ${w.branch}  ${w.path}` +
      (w.state === 'interrupted' ? '  (interrupted: its work may be uncommitted; integrate commits it first)' : ''),
  );
}

function collectStatus(store: RunStore, limit: number, teams?: TeamFiles): Status {
  store.refresh();
  const active = store
    .active()
    .map((l) => ({ ...indexRow(l), ...(l.p !== undefined && !sameProcessAlive(l.p, l.ps) ? { orphaned: true } : {}) }));
  const history = store.newestFinished(limit).map((id) => indexRow(store.line(id)!));
  const teamRows = (teams?.recent(limit) ?? []).map((t) => ({
    id: t.id,
    state: t.state,
    createdAt: t.createdAt,
    endedAt: t.endedAt,
    topology: t.spec.topology,
    members: t.members.length,
    task: taskLine(t.spec.task),
    ...(t.state === 'running' && t.owner && !sameProcessAlive(t.owner.pid, t.owner.start) ? { orphaned: true } : {}),
  }));
  return {
    stateDir: store.dir,
    active,
    history,
    finished: store.finishedCount,
    worktrees: keptWorktrees(store),
    teams: teamRows,
  };
}

const cost = (r: StatusRow) =>
  r.costUsd === undefined
    ? '—'
    : `$${r.costUsd.toFixed(r.costUsd < 0.01 ? 6 : 4)}${r.costSource === 'estimated' ? '~' : ''}`;
const tokens = (r: StatusRow) => (r.inputTokens === undefined ? '—' : `${r.inputTokens}/${r.outputTokens ?? 0}`);

function formatStatus(s: Status, now: number): string {
  const out: string[] = [];
  out.push(`Active agents (${s.active.length})`);
  if (s.active.length === 0) out.push('  none running or queued');
  else {
    const rows = s.active.map((r) => [
      r.id,
      r.orphaned ? `${r.state} (server gone)` : r.state,
      r.backend,
      r.model,
      time(r.startedAt),
      r.startedAt ? duration(now - Date.parse(r.startedAt)) : `queued ${duration(now - Date.parse(r.createdAt))}`,
      cell(r.task, 60),
    ]);
    out.push(indent(textTable(['agent', 'state', 'backend', 'model', 'started', 'elapsed', 'task'], rows)));
  }
  out.push('', `History (newest ${s.history.length} of ${s.finished})`);
  if (s.history.length === 0) out.push('  no finished agents yet');
  else {
    const rows = s.history.map((r) => [
      r.id,
      r.state,
      r.backend,
      r.model,
      time(r.endedAt),
      r.startedAt && r.endedAt && r.state !== 'interrupted'
        ? duration(Date.parse(r.endedAt) - Date.parse(r.startedAt))
        : '—',
      tokens(r),
      cost(r),
      cell(r.task, 60),
    ]);
    out.push(
      indent(textTable(['agent', 'state', 'backend', 'model', 'ended', 'took', 'tokens in/out', 'cost', 'task'], rows)),
    );
  }
  if (s.teams.length) {
    out.push('', `Teams (newest ${s.teams.length})`);
    const rows = s.teams.map((t) => [
      t.id,
      t.orphaned ? `${t.state} (server gone)` : t.state,
      t.topology,
      String(t.members),
      time(t.createdAt),
      t.endedAt && t.state !== 'interrupted' ? duration(Date.parse(t.endedAt) - Date.parse(t.createdAt)) : '—',
      cell(t.task, 60),
    ]);
    out.push(indent(textTable(['team', 'state', 'topology', 'members', 'started', 'took', 'task'], rows)));
  }
  if (s.worktrees.length) {
    out.push('', `Worktrees kept (${s.worktrees.length}): integrate (merge, cherry-pick, patch) or discard each`);
    out.push(...worktreeLines(s.worktrees).map((line) => `  ${line}`));
  }
  out.push(
    '',
    `Run store: ${s.stateDir} (~ marks estimated costs). Details: the result tool, or ${s.stateDir}/runs/<agent>/.`,
  );
  return `${out.join('\n')}\n`;
}

const indent = (text: string) => text.replace(/^/gm, '  ');

export const STATUS_USAGE = `Usage: polyspawn status [--limit N] [--json]

The project's agents from its run store: those running or queued (in any server, or a
\`polyspawn run\`), then the newest finished ones (default ${DEFAULT_STATUS_LIMIT}).
The project is the current folder, or POLYSPAWN_PROJECT_DIR.
`;

export async function statusCommand(argv: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, {
    limit: { type: 'string', short: 'n' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return (void io.stdout.write(STATUS_USAGE), 0);
  if (positionals.length) throw new InputError(`status takes no arguments (got ${positionals.join(' ')})`);
  const limit = values.limit === undefined ? DEFAULT_STATUS_LIMIT : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 0)
    throw new InputError(`--limit must be a whole number of agents, not "${values.limit}"`);
  const config = loadConfig(allBackends, io.env, io.cwd);
  // It only reads: the store redacts what it writes, and nothing is written here.
  const store = new RunStore({ stateDir: config.stateDir, redactor: new Redactor(), identity: selfIdentity() });
  // A reader only: a dead server's team is shown so, and left for the next server to mark.
  const status = collectStatus(store, limit, new TeamFiles(config.stateDir, new Redactor(), selfIdentity(), false));
  io.stdout.write(values.json ? `${JSON.stringify(status, null, 2)}\n` : formatStatus(status, Date.now()));
  return 0;
}
