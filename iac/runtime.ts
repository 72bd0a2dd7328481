// The store and IAC.md as one piece the app wires in. It watches: every job change, once the
// job layer has saved it through the store (src/jobs/recorder.ts), schedules IAC.md; at start
// the history is loaded (after the MCP handshake, so start-up does not wait on it) and the jobs
// of dead servers are recovered; at exit IAC.md is flushed.
import { dirname } from 'node:path';
import type { Context } from '../src/config/context.js';
import type { JobRecord } from '../src/jobs/table.js';
import { sameProcessAlive, selfIdentity } from '../src/lib/proc.js';
import { scrubDir } from '../src/lib/scrub.js';
import { RunStore, type Recovered } from './store.js';
import { unwritableBecause } from '../src/lib/fs.js';
import { iacTarget, IacWriter } from './writer.js';
import { TeamFiles } from './teams.js';
import type { TeamRecord } from '../src/jobs/teams/record.js';

/** Teams shown in IAC.md, newest first. */
const TEAMS_SHOWN = 10;

/** The longest an exiting process waits for IAC.md (the lock of a dead writer goes stale in 5 s). */
const EXIT_FLUSH_MS = 8000;

export type IacRuntime = {
  store: RunStore;
  writer: IacWriter;
  /** Teams, one file each beside the runs. */
  teams: TeamFiles;
  /** Where IAC.md is written: the configured file, or beside it when that one is not polyspawn's. */
  file: string;
  /** What cannot be written (the store's folder, IAC.md's), found at start: one sentence each. */
  problems: string[];
  /** The JobTable's onChange listener, after the job layer has saved the change: IAC.md is scheduled. */
  record(): void;
  /** The TeamTable's onChange listener. */
  recordTeam(team: TeamRecord): void;
  /** Loads the history and recovers dead servers' jobs, in the background. */
  start(): void;
  /** Flushes IAC.md and waits for background clean-up. */
  close(): Promise<void>;
  /** close(), waiting at most EXIT_FLUSH_MS: what a process about to exit gives it. */
  closeBeforeExit(): Promise<void>;
};

/** What the app hands the record, which starts and ends no process itself (wired by src/app.ts). */
type IacHooks = {
  /** Ends what is left of a recovered job's process group (the process runner's). */
  /** Ends a run's processes: its group (when given) and those carrying its mark. */
  endGroup: (pgid: number | undefined, graceMs: number, mark?: string) => Promise<void>;
  /** Removes a recovered job's sandbox container, which outlives its server (src/jobs/process/sandbox.ts). */
  endSandbox?: (record: JobRecord) => Promise<void>;
  /** Saves the job changes not saved yet (the job layer's recorder), before IAC.md's last write. */
  beforeClose?: () => void;
};

export function createIacRuntime(
  { config, secrets: redactor, log }: Pick<Context, 'config' | 'secrets' | 'log'>,
  { endGroup, endSandbox = () => Promise.resolve(), beforeClose = () => undefined }: IacHooks,
): IacRuntime {
  // The newest 1,000 finished jobs (what `list` can show), or IAC.md's N if more, in memory.
  const identity = selfIdentity();
  const store = new RunStore({
    stateDir: config.stateDir,
    redactor,
    identity,
    keepFinished: Math.max(1000, config.iacEntries),
    onDamage: log,
  });
  const background = new Set<Promise<unknown>>();
  const track = (p: Promise<unknown>) => {
    background.add(p);
    void p.finally(() => background.delete(p));
  };

  const onRecovered = (recovered: Recovered[]) => {
    log(
      `marked ${recovered.length} job(s) of ended servers interrupted: ${recovered.map((r) => r.record.id).join(', ')}`,
    );
    const scrub = (id: string) => scrubDir(store.runDir(id), redactor);
    for (const work of endRecovered(recovered, { endGroup, endSandbox }, config.killGraceMs, scrub)) track(work);
  };

  const teams = new TeamFiles(config.stateDir, redactor, identity);
  const target = iacTarget(config.iacFile);
  const writer = new IacWriter(store, {
    file: target.file,
    entries: config.iacEntries,
    log,
    onRecovered,
    teams: () => teams.recent(TEAMS_SHOWN),
  });
  const problems = unwritable(config.stateDir, target);
  for (const problem of problems) log(problem);
  let started = false;
  let changes = 0;

  return {
    store,
    writer,
    teams,
    file: target.file,
    problems,
    record() {
      changes++;
      writer.schedule();
    },
    recordTeam(team) {
      try {
        teams.save(team);
      } catch (error) {
        log(`could not record team ${team.id} in ${teams.dir}: ${(error as Error).message}`);
      }
      writer.schedule();
    },
    start() {
      if (started) return;
      started = true;
      setImmediate(() => {
        store.refresh();
        // Re-render when there is history (recovering what a dead server left running);
        // a project that never ran a job gets no IAC.md.
        if (store.finishedCount > 0 || store.active().length > 0) writer.schedule();
      });
    },
    async close() {
      beforeClose();
      await writer.close();
      await Promise.allSettled([...background]);
      if (changes) log(`IAC.md: ${writer.writes} writes for ${changes} job changes (${target.file})`);
    },
    closeBeforeExit() {
      return Promise.race([this.close(), new Promise<void>((r) => setTimeout(r, EXIT_FLUSH_MS).unref())]);
    },
  };
}

/** A run mark as the runner makes it (16 random bytes in hex): a record read back is not trusted. */
const RUN_MARK = /^[0-9a-f]{32}$/;

/**
 * Ends what dead servers' recovered jobs left behind: what is left of their process groups (but
 * only where the group leader is still the process that was started for it: a pid can be
 * reused), their containers, and the secrets in their run folders.
 */
function endRecovered(
  recovered: Recovered[],
  { endGroup, endSandbox }: Required<Pick<IacHooks, 'endGroup' | 'endSandbox'>>,
  graceMs: number,
  scrub: (id: string) => Promise<unknown>,
): Promise<unknown>[] {
  const work: Promise<unknown>[] = [];
  for (const { record } of recovered) {
    const group = record.group;
    const leaderIsOurs = group?.start !== undefined && sameProcessAlive(group.pgid, group.start);
    // The mark reaches what left the group (setsid'd shells), even once the leader is gone.
    const mark = typeof group?.mark === 'string' && RUN_MARK.test(group.mark) ? group.mark : undefined;
    if (group && (leaderIsOurs || mark)) work.push(endGroup(leaderIsOurs ? group.pgid : undefined, graceMs, mark));
    if (record.sandbox) work.push(endSandbox(record));
    work.push(scrub(record.id).catch(() => undefined));
  }
  return work;
}

/** What cannot be written, found at start (the store's folder, IAC.md's): one sentence each, saying what to set. */
function unwritable(stateDir: string, target: { file: string; problem?: string }): string[] {
  const problems: string[] = target.problem ? [target.problem] : [];
  const storeProblem = unwritableBecause(stateDir);
  if (storeProblem) {
    problems.push(
      `The run store (${stateDir}) cannot be written: ${storeProblem}. Agents still run and result answers while this server runs, ` +
        'but no record or log is kept: set state_dir in polyspawn.config.json or POLYSPAWN_STATE_DIR to a writable folder.',
    );
  }
  const iacProblem = unwritableBecause(dirname(target.file));
  if (iacProblem) {
    problems.push(
      `IAC.md (${target.file}) cannot be written: ${iacProblem}. Set iac_file in polyspawn.config.json or POLYSPAWN_IAC_FILE to a writable place.`,
    );
  }
  return problems;
}
