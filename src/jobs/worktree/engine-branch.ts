// The branch contract with an engine that shares no files (src/jobs/process/remote-engine.ts): the
// job's branch goes into the run's folder as a git bundle, and the bundle its container sends back
// is fetched onto the job's worktree, so `integrate`, overlaps and the record see a worktree job.
// That bundle is the agent's: only its one branch is taken, it must descend from the job's base,
// its objects are read by `git bundle unbundle` (no transport, no hook, no config of the bundle's:
// a bundle holds objects and refs only) into a quarantine and checked there before any enters the
// repository, and the worktree moved forward by a fast-forward merge, every git command pinned as
// git.ts pins it.
import { linkSync, lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
 * The largest bundle taken back: remote-engine.ts copies no file out of a container past it, and
 * one found larger here is refused before git reads it.
 */
export const MAX_BUNDLE_BYTES = 512 * 1024 * 1024;

/**
 * Fetches the agent's branch from the bundle its container sent back onto the worktree (which
 * still holds `base`, the run's start). Nothing when there is no bundle (no change). An Error says
 * why the branch was not taken; the bundle is kept then, and the error names it. Its objects are
 * read into a quarantine (a folder of their own in the repository's objects folder, as git's
 * receive-pack does) and checked there; only a branch that is taken moves them into the
 * repository, so a refused bundle leaves none of its objects there. The quarantine is removed on
 * every path (a crash leaves a tmp_objdir-* folder, which `git gc` removes).
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
  if (found.size > MAX_BUNDLE_BYTES) throw refuse(`it is larger than ${MAX_BUNDLE_BYTES / 1024 / 1024} MiB`);
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
  const objects = resolve(repo.workTree, (await gitOk(repo, ['rev-parse', '--git-path', 'objects'])).trim());
  const quarantine = mkdtempSync(join(objects, 'tmp_objdir-polyspawn-'));
  try {
    const checked = { ...repo, quarantine: { dir: quarantine, objects } };
    const unbundled = await git(checked, ['bundle', 'unbundle', bundle]);
    if (/lacks these prerequisite commits/.test(unbundled.stderr))
      throw refuse(`it needs commits the repository does not have (${firstLines(unbundled.stderr)})`);
    if (unbundled.code !== 0) throw refuse(`git could not read it (${firstLines(unbundled.stderr)})`);
    const type = (await git(checked, ['cat-file', '-t', commit])).stdout.trim();
    if (type !== 'commit') throw refuse(`${wanted} is not a commit (${type || 'no object'})`);
    const descends = await git(checked, ['merge-base', '--is-ancestor', base, commit]);
    if (descends.code !== 0) throw refuse(`${wanted} does not descend from the job's base ${base.slice(0, 10)}`);
    // Every object the branch names is there (a bundle may hold a commit without its tree), as git's
    // own fetch checks.
    const complete = await git(checked, ['rev-list', '--objects', '--quiet', commit, '--not', base]);
    if (complete.code !== 0) throw refuse(`it lacks objects its branch needs (${firstLines(complete.stderr)})`);
    migrate(quarantine, objects);
  } finally {
    rmSync(quarantine, { recursive: true, force: true });
  }
  const merged = await git(worktree, ['merge', '--ff-only', '--quiet', commit]);
  if (merged.code !== 0) throw refuse(`the worktree could not be moved to it (${firstLines(merged.stderr)})`);
  rmSync(bundle, { force: true });
}

/**
 * Moves a quarantine's objects into the repository's objects folder, as git's tmp_objdir_migrate
 * does: a pack's index last (git reads a pack by its index), a file already there kept.
 */
function migrate(from: string, to: string): void {
  const order = (name: string) => ['.keep', '.pack', '.rev', '.idx'].findIndex((ext) => name.endsWith(ext));
  const entries = readdirSync(from, { withFileTypes: true }).sort((a, b) => order(a.name) - order(b.name));
  for (const entry of entries) {
    const [source, target] = [join(from, entry.name), join(to, entry.name)];
    if (entry.isDirectory()) {
      makeDirs(target);
      migrate(source, target);
    } else if (entry.isFile()) {
      try {
        linkSync(source, target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
    }
  }
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}
