// The branch contract with an engine that shares no files (src/jobs/process/remote-engine.ts): the
// job's branch goes into the run's folder as a git bundle, and the bundle its container sends back
// is fetched onto the job's worktree, so `integrate`, overlaps and the record see a worktree job.
// That bundle is the agent's: only its one branch is taken, it must descend from the job's base,
// its objects are read by `git bundle unbundle` (no transport, no hook, no config of the bundle's:
// a bundle holds objects and refs only) and the worktree moved forward by a fast-forward merge,
// every git command pinned as git.ts pins it.
import { lstatSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { makeDirs } from '../../lib/fs.js';
import { firstLines, git, gitOk, type GitPlace } from './git.js';

/** In the run's folder: the branch going in, the agent's coming back. */
export const WORK_BUNDLE = 'work.bundle';
export const RESULT_BUNDLE = 'result.bundle';

/** Writes the job's branch, as it is at the run's start, into the run's folder for the container. */
export async function bundleBranchIn(repo: GitPlace, branch: string, runDir: string): Promise<void> {
  makeDirs(runDir);
  await gitOk(repo, ['bundle', 'create', '--quiet', join(runDir, WORK_BUNDLE), `refs/heads/${branch}`]);
}

/** Removes the bundle that went in (the container has its copy). */
export const removeBundleIn = (runDir: string) => rmSync(join(runDir, WORK_BUNDLE), { force: true });

/**
 * Fetches the agent's branch from the bundle its container sent back onto the worktree (which
 * still holds `base`, the run's start). Nothing when there is no bundle (no change). An Error says
 * why the branch was not taken; the bundle is kept then, and the error names it.
 */
export async function fetchBranchBack(
  repo: GitPlace,
  worktree: GitPlace,
  branch: string,
  base: string,
  runDir: string,
): Promise<void> {
  const bundle = join(runDir, RESULT_BUNDLE);
  const found = lstatOrUndefined(bundle);
  if (!found) return;
  const refuse = (why: string) =>
    new Error(`the branch its container sent back was not taken: ${why} (the bundle is kept: ${bundle})`);
  if (!found.isFile()) throw refuse('it is not a regular file');
  const heads = await git(repo, ['bundle', 'list-heads', bundle]);
  if (heads.code !== 0) throw refuse(`not a git bundle (${firstLines(heads.stderr)})`);
  const refs = heads.stdout.trim().split('\n').filter(Boolean);
  const wanted = `refs/heads/${branch}`;
  const head = refs.length === 1 ? /^([0-9a-f]{40,64}) (.+)$/.exec(refs[0]!) : null;
  if (!head || head[2] !== wanted)
    throw refuse(
      `it must hold ${wanted} alone, and holds ${refs.length} refs (${refs
        .slice(0, 3)
        .map((r) => r.split(' ')[1])
        .join(', ')})`,
    );
  const commit = head[1]!;
  const unbundled = await git(repo, ['bundle', 'unbundle', bundle]);
  if (unbundled.code !== 0) throw refuse(`git could not read it (${firstLines(unbundled.stderr)})`);
  const isCommit = await git(repo, ['cat-file', '-t', commit]);
  if (isCommit.stdout.trim() !== 'commit') throw refuse(`${wanted} is not a commit`);
  const descends = await git(repo, ['merge-base', '--is-ancestor', base, commit]);
  if (descends.code !== 0) throw refuse(`${wanted} does not descend from the job's base ${base.slice(0, 10)}`);
  const merged = await git(worktree, ['merge', '--ff-only', '--quiet', commit]);
  if (merged.code !== 0) throw refuse(`the worktree could not be moved to it (${firstLines(merged.stderr)})`);
  rmSync(bundle, { force: true });
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}
