// wait_for_agents over jobs and teams together: it returns when the jobs and teams asked for
// have finished (or one of them, "any"), when an agent among them or among the teams' members
// asks the orchestrator something, or when the time is up.
import { isFinished, type JobRecord, type JobTable } from './table.js';
import { isTeamFinished, type TeamRecord } from './teams/record.js';
import type { TeamTable } from './teams/table.js';

export type WorkWait = {
  finished: JobRecord[];
  pending: JobRecord[];
  teams: TeamRecord[];
};

export async function waitForWork(
  jobs: Pick<JobTable, 'get' | 'waitFor'>,
  teams: Pick<TeamTable, 'get' | 'waitFor' | 'activeMembers'>,
  jobIds: string[],
  teamIds: string[],
  options: { timeoutMs: number; mode: 'all' | 'any'; signal?: AbortSignal; waiter?: string },
): Promise<WorkWait> {
  const deadline = Date.now() + options.timeoutMs;
  const state = () => {
    const records = jobIds.map((id) => jobs.get(id)!);
    const teamRecords = teamIds.map((id) => teams.get(id)!);
    return {
      finished: records.filter((r) => isFinished(r.state)),
      pending: records.filter((r) => !isFinished(r.state)),
      teams: teamRecords,
    };
  };
  for (;;) {
    const now = state();
    const pendingTeams = now.teams.filter((t) => !isTeamFinished(t.state));
    const done = now.finished.length + now.teams.length - pendingTeams.length;
    const remaining = deadline - Date.now();
    if (
      now.pending.length + pendingTeams.length === 0 ||
      (options.mode === 'any' && done > 0) ||
      remaining <= 0 ||
      options.signal?.aborted
    )
      return now;
    const round = new AbortController();
    const stop = () => round.abort();
    options.signal?.addEventListener('abort', stop, { once: true });
    const watched = [...now.pending.map((j) => j.id), ...teams.activeMembers(pendingTeams.map((t) => t.id))];
    // No job watched: a team is pending, and its wait, which runs out with the time, is the race.
    const jobWait = watched.length
      ? jobs
          .waitFor(watched, { timeoutMs: remaining, mode: 'any', signal: round.signal, waiter: options.waiter })
          .then((r) => !!r.questioned)
      : undefined;
    await Promise.race([
      ...(jobWait ? [jobWait] : []),
      ...pendingTeams.map((t) => teams.waitFor(t.id, { timeoutMs: remaining, signal: round.signal })),
    ]);
    round.abort();
    options.signal?.removeEventListener('abort', stop);
    // A question for the orchestrator (also one that came as the round ended): return now, with it.
    if (await jobWait) return state();
  }
}
