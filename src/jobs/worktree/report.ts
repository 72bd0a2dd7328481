// What a job isolated in a git worktree carries on its record, where its worktree and branch are,
// and the overlaps among siblings: pure, for the job layer, the results, IAC.md and the teams.
import { join } from 'node:path';

/** What the worktree held when the job ended (JobWorktree.changes). */
export type WorktreeChanges = {
  /** Every file changed from the base commit, committed by the agent or by polyspawn. */
  files: string[];
  /** Files the agent changed in commits of its own. */
  committed: string[];
  /** Files it left uncommitted, which polyspawn committed on the branch. */
  uncommitted: string[];
  agentCommitted: boolean;
  /** `git diff --shortstat` from the base: "2 files changed, 5 insertions(+)". */
  diffStat: string;
  /** The branch's commit once polyspawn committed. */
  head: string;
  /** Removed at the end: nothing had changed. */
  removed: boolean;
};

/** JobRecord.worktree: set when the worktree is ready, completed with `changes` when the job ends. */
export type JobWorktree = {
  path: string;
  branch: string;
  /** The commit it started from. */
  base: string;
  /** What the orchestrator should know: a dirty checkout left behind, submodules, a cancelled run. */
  notes?: string[];
  changes?: WorktreeChanges;
};

export const WORKTREES_DIR = 'worktrees';
const BRANCH_PREFIX = 'polyspawn/';

/** The worktree and branch of the job `owner` (the job itself, or the one a resumed job continues). */
export function worktreePlace(stateDir: string, owner: string): { path: string; branch: string } {
  return { path: join(stateDir, WORKTREES_DIR, owner), branch: `${BRANCH_PREFIX}${owner}` };
}

/** What overlaps needs of a job: its id, its run's times, its worktree's changes. */
export type OverlapJob = { id: string; startedAt?: string; endedAt?: string; worktree?: JobWorktree };

type Overlap = { file: string; agentIds: string[] };

/** The files that more than one of `jobs` changed in its worktree, each with the jobs that did, by path. */
export function overlapsAmong(jobs: readonly OverlapJob[]): Overlap[] {
  const byFile = new Map<string, string[]>();
  for (const job of jobs) {
    for (const file of job.worktree?.changes?.files ?? []) {
      const ids = byFile.get(file) ?? [];
      if (!ids.includes(job.id)) ids.push(job.id);
      byFile.set(file, ids);
    }
  }
  return [...byFile]
    .filter(([, ids]) => ids.length > 1)
    .map(([file, agentIds]) => ({ file, agentIds }))
    .sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
}

/**
 * The overlaps among the jobs `ids` names (a team's members, a batch), looked up with `get` (a
 * JobTable's); a job unknown, or without a worktree, changes nothing.
 */
export function overlapsOfIds(get: (id: string) => OverlapJob | undefined, ids: readonly string[]): Overlap[] {
  return overlapsAmong(ids.flatMap((id) => get(id) ?? []));
}

/**
 * A job's siblings: the other isolated jobs whose runs overlapped in time with its own (each
 * started before the other ended), so each started from the project as it was while the other
 * worked and neither saw the other's changes. Returns the overlaps of `job` with them.
 */
export function siblingOverlaps(job: OverlapJob, others: readonly OverlapJob[]): Overlap[] {
  if (!job.worktree?.changes) return [];
  const siblings = others.filter((o) => o.id !== job.id && o.worktree?.changes && ranTogether(job, o));
  const mine = new Set(job.worktree.changes.files);
  return overlapsAmong([job, ...siblings]).filter((o) => mine.has(o.file) && o.agentIds.includes(job.id));
}

/** When the other job's run overlapped this one's in time (a cheap test on summaries, before reading records). */
export function ranTogether(
  a: Pick<OverlapJob, 'startedAt' | 'endedAt'>,
  b: Pick<OverlapJob, 'startedAt' | 'endedAt'>,
) {
  if (!a.startedAt || !b.startedAt) return false;
  const end = (j: typeof a) => (j.endedAt ? Date.parse(j.endedAt) : Infinity);
  return Date.parse(a.startedAt) <= end(b) && Date.parse(b.startedAt) <= end(a);
}
