// Sessions of `session: true` agents: every call continues the agent's previous conversation
// (the backend's own resume: claude --resume, codex exec resume, copilot --resume). The session
// id lives in the run store's folder, `<stateDir>/sessions/<name>.json`, so it survives a
// restart. Turns of one session never run at the same time: a call made while a turn runs is
// queued behind it (its job waits as `queued`, outside the concurrency limit, so other jobs
// are not held up), and it reads the session to resume only when its turn comes.
// `new_session: true` starts over.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Usage } from '../../../backends/types.js';
import { isFinished, type JobRecord, type JobRequest, type JobTable } from '../table.js';
import { makeDirs, readRegularFile, writeAtomic } from '../../lib/fs.js';

type SessionState = {
  agent: string;
  backend: string;
  sessionId: string;
  /** The job of the newest turn. */
  lastJobId: string;
  /** The session's running token totals after that turn (codex, copilot report totals). */
  totals?: Usage;
  /** The session's cost so far after that turn, where its agent reports one over the session. */
  costUsd?: number;
  updatedAt: string;
};

export class AgentSessions {
  /** Per agent: settles when its newest submitted turn has finished. */
  private readonly tails = new Map<string, Promise<void>>();
  readonly dir: string;

  constructor(
    stateDir: string,
    private readonly jobs: JobTable,
    private readonly log: (message: string) => void = () => undefined,
  ) {
    this.dir = join(stateDir, 'sessions');
    jobs.onStateChange((job) => {
      if (job.agent?.session && isFinished(job.state)) this.turnEnded(job);
    });
  }

  private file(name: string): string {
    return join(this.dir, `${name}.json`);
  }

  read(name: string): SessionState | undefined {
    // Never through a link nor from a FIFO (a cloned .polyspawn/ may hold either): read as a missing session.
    const text = readRegularFile(this.file(name), 1 << 20);
    if (typeof text !== 'string') return undefined;
    try {
      const state = JSON.parse(text) as SessionState;
      return typeof state?.sessionId === 'string' && typeof state.backend === 'string' ? state : undefined;
    } catch {
      return undefined;
    }
  }

  /** Forgets an agent's session (new_session, remove_agent). */
  reset(name: string): void {
    rmSync(this.file(name), { force: true });
  }

  /** Submits one turn of an agent's session: after the turn before it, resuming its session. */
  submit(request: JobRequest & { agent: { name: string } }, newSession: boolean): JobRecord {
    const name = request.agent.name;
    const previous = this.tails.get(name);
    const job = this.jobs.submit(request, {
      after: previous,
      prepare: (record) => this.prepare(record, newSession),
    });
    // Its turn and every turn before it: a turn cancelled while it waits must not let the
    // next one overtake the turn still running before it.
    const done = Promise.all([previous, whenFinished(this.jobs, job.id)]).then(() => undefined);
    this.tails.set(name, done);
    void done.then(() => {
      if (this.tails.get(name) === done) this.tails.delete(name);
    });
    return job;
  }

  private prepare(record: JobRecord, newSession: boolean): void {
    const name = record.agent!.name;
    if (newSession) {
      this.reset(name);
      return;
    }
    const state = this.read(name);
    // A definition moved to another backend cannot continue the old backend's session.
    if (!state || state.backend !== record.backend) return;
    record.resumeSessionId = state.sessionId;
    if (state.totals) record.previousSessionTotals = state.totals;
    if (state.costUsd !== undefined) record.previousSessionCostUsd = state.costUsd;
  }

  private turnEnded(job: JobRecord): void {
    const sessionId = job.outcome?.sessionId;
    if (!sessionId) return; // nothing to continue: the session before it, if any, stays
    const state: SessionState = {
      agent: job.agent!.name,
      backend: job.backend,
      sessionId,
      lastJobId: job.id,
      totals: job.outcome?.sessionTotals,
      costUsd: job.outcome?.sessionCostUsd,
      updatedAt: new Date().toISOString(),
    };
    try {
      makeDirs(this.dir);
      writeAtomic(this.file(state.agent), `${JSON.stringify(state, null, 2)}\n`);
    } catch (error) {
      this.log(`could not save the session of agent ${state.agent} in ${this.dir}: ${(error as Error).message}`);
    }
  }
}

/** Settles once job `id` has finished (at once if it already has, or is unknown). */
export function whenFinished(jobs: JobTable, id: string): Promise<void> {
  return jobs.whenFinished(id).then(
    () => undefined,
    () => undefined, // an unknown job: nothing to wait for
  );
}
