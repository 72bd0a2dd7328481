// Every job kept in the store, and no secret in what a run produces. The recorder saves each
// change of a job through the store port (JobStore) and is the executor chain's outermost
// link (`guard`): the job on disk before its child starts, the child's stdin chosen, and what
// the run produces redacted. The record (iac/) only watches: it renders what was saved.
import type { Context } from '../config/context.js';
import type { Redactor } from '../lib/redact.js';
import { OVERLAP, scrubDir } from '../lib/scrub.js';
import { isFinished, type ExecutionResult, type Executor, type JobRecord, type JobStore } from './table.js';

export class JobRecorder {
  /** A job's changes not saved yet: saved at the end of this turn of the event loop. */
  private readonly unsaved = new Map<string, JobRecord>();
  /** Why the last save failed (its code), so that one cause is logged once. */
  private failed = '';

  constructor(
    private readonly store: JobStore,
    private readonly secrets: Redactor,
    private readonly log: Context['log'],
  ) {}

  /**
   * The JobTable's onChange listener. A job's changes within one turn of the event loop are
   * saved once: a spawn under the concurrency limit is queued, started and given its process
   * group in the same turn, and each save is a record rewrite plus an index line
   * (bench/burst.mjs). A final state is saved at once, before anyone hears the job finished
   * (wait_for_agents, another server's list).
   */
  changed(job: JobRecord): void {
    if (isFinished(job.state)) this.saveNow(job);
    else {
      if (this.unsaved.size === 0) setImmediate(() => this.saveNow());
      this.unsaved.set(job.id, job);
    }
  }

  /** Saves every change not saved yet (before IAC.md's last write). */
  flush(): void {
    this.saveNow();
  }

  private saveNow(only?: JobRecord): void {
    for (const job of only ? [only] : this.unsaved.values()) {
      this.unsaved.delete(job.id);
      try {
        this.store.save(job);
        this.failed = '';
      } catch (error) {
        // Once per cause until a save succeeds again: a full disk is one line, not one per job.
        const cause = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
        if (cause !== this.failed)
          this.log(
            `could not record job ${job.id} in ${this.store.dir}: ${(error as Error).message} (later failures from the same cause are not logged)`,
          );
        this.failed = cause;
      }
    }
  }

  /** Wraps the app's executor: saved before its child starts, stdin from the stored prompt, nothing secret out. */
  guard(execute: Executor): Executor {
    return guardExecutor(
      (job, control) => {
        // On disk before its process starts, whatever the event loop is busy with: a burst's
        // spawns can hold off the end of the turn for seconds, and a job must never run, or
        // end, unrecorded (a crash would lose it; its index would lack its running line).
        if (this.unsaved.has(job.id)) this.saveNow(job);
        // The stored prompt, when it is the prompt itself, is what a CLI reads on stdin.
        return execute(job, { ...control, promptFile: this.store.promptFile(job) });
      },
      this.secrets,
      (id) => this.store.runDir(id),
      this.log,
    );
  }
}

/**
 * Wraps an executor so that nothing it produces carries a secret: the outcome, the output
 * tail shown while it runs, an error it throws, and (once it has ended) its run folder.
 */
export function guardExecutor(
  execute: Executor,
  redactor: Redactor,
  runDir: (id: string) => string,
  log: (message: string) => void,
): Executor {
  return async (job, control) => {
    let result: ExecutionResult;
    try {
      result = await execute(job, {
        ...control,
        // A secret cut by the tail's start would escape the patterns: redact a longer tail.
        onOutputTail: (tail) => control.onOutputTail((max) => redactor.text(tail(max + OVERLAP)).slice(-max)),
      });
    } catch (error) {
      throw new Error(redactor.text((error as Error)?.message ?? String(error)));
    } finally {
      await scrubDir(runDir(job.id), redactor).catch((error: unknown) =>
        log(`could not scrub the logs of ${job.id}: ${(error as Error).message}`),
      );
    }
    return { ...result, outcome: redactor.deep(result.outcome) };
  };
}
