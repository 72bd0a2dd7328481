// The store and IAC.md as one piece the app wires in: every job change is saved, then
// IAC.md is scheduled; at start the history is loaded (after the MCP handshake, so start-up
// does not wait on it) and the jobs of dead servers are recovered; at exit IAC.md is flushed.
import type { Config } from '../src/config.js';
import type { Executor, JobRecord } from '../src/jobs.js';
import { terminateGroup } from '../src/runner.js';
import { sameProcessAlive, selfIdentity } from './proc.js';
import type { Redactor } from './redact.js';
import { guardExecutor, scrubDir } from './scrub.js';
import { RunStore, type Recovered } from './store.js';
import { IacWriter } from './writer.js';

export type IacRuntime = {
  store: RunStore;
  writer: IacWriter;
  /** Wraps the app's executor: redacted outcomes, scrubbed run folders. */
  guard(execute: Executor): Executor;
  /** The JobTable's onChange listener. */
  record(job: JobRecord): void;
  /** Loads the history and recovers dead servers' jobs, in the background. */
  start(): void;
  /** Flushes IAC.md and waits for background clean-up. */
  close(): Promise<void>;
};

export function createIacRuntime(config: Config, redactor: Redactor, log: (message: string) => void): IacRuntime {
  const store = new RunStore({ stateDir: config.stateDir, redactor, identity: selfIdentity() });
  const background = new Set<Promise<unknown>>();
  const track = (p: Promise<unknown>) => {
    background.add(p);
    void p.finally(() => background.delete(p));
  };

  const onRecovered = (recovered: Recovered[]) => {
    log(`marked ${recovered.length} job(s) of ended servers interrupted: ${recovered.map((r) => r.record.id).join(', ')}`);
    for (const { record } of recovered) {
      const group = record.group;
      // End what is left of the job's processes, but only if the group leader is still the
      // process that was started for it (a pid can be reused).
      if (group?.start && sameProcessAlive(group.pgid, group.start)) track(terminateGroup(group.pgid, config.killGraceMs));
      track(scrubDir(store.runDir(record.id), redactor).catch(() => undefined));
    }
  };

  const writer = new IacWriter(store, { file: config.iacFile, entries: config.iacEntries, log, onRecovered });
  let failed = '';
  let started = false;
  let changes = 0;

  return {
    store,
    writer,
    guard: (execute) => guardExecutor(execute, redactor, (id) => store.runDir(id), log),
    record(job) {
      changes++;
      try {
        store.save(job);
        failed = '';
      } catch (error) {
        const message = `could not record job ${job.id} in ${store.dir}: ${(error as Error).message}`;
        if (message !== failed) log(message);
        failed = message;
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
      await writer.close();
      await Promise.allSettled([...background]);
      if (changes) log(`IAC.md: ${writer.writes} writes for ${changes} job changes (${config.iacFile})`);
    },
  };
}
