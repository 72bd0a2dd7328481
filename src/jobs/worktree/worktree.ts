// isolation: "worktree": a CLI job runs in a git worktree of its own, on a new branch
// polyspawn/<id> made from the project's HEAD (or a base given), under <state_dir>/worktrees/<id>.
// When it ends, what it left uncommitted is committed on the branch and its changes are reported;
// a worktree with no changes is removed. The user's checkout, index, stash and branches are never
// touched: every command here runs in the worktree, or only adds and removes polyspawn's own.
// Every git command is pinned to folders computed here (git.ts says why): the repository as
// resolved once from the user's checkout, and a worktree's admin folder by its name, never the
// `.git` file the agent could rewrite.
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, relative, sep } from 'node:path';
import type { Config } from '../../config/config.js';
import { InputError } from '../../lib/errors.js';
import { isInside, isTempBeside, makeDirs } from '../../lib/fs.js';
import { lock } from '../../lib/lock.js';
import type { Redactor } from '../../lib/redact.js';
import { taskLine } from '../../lib/text.js';
import type { ExecutionResult, Executor, JobRecord } from '../table.js';
import {
  allChanges,
  branchExists,
  commitOf,
  firstLines,
  git,
  gitDiscover,
  gitOk,
  nameList,
  NO_DIFF_PROGRAMS,
  POLYSPAWN_IDENTITY,
  type GitPlace,
} from './git.js';
import { WORKTREES_DIR, worktreePlace, type JobWorktree, type WorktreeChanges } from './report.js';
import { sharesNoFiles } from '../../config/sandbox.js';
import { runFolder } from '../../lib/run-folder.js';
import { bundleBranchIn, fetchBranchBack, removeBundleIn } from './engine-branch.js';

export type WorktreeContext = { config: Pick<Config, 'projectDir' | 'stateDir' | 'iacFile'>; secrets: Redactor };

/** A worktree ready for a run: where the CLI works in it, and the commit it had when the run began. */
type OpenWorktree = JobWorktree & { repo: GitPlace; cwd: string; startHead: string };

/** The worktrees in use by this server's running jobs: a resumed job may not share one with a running one. */
const inUse = new Map<string, string>();
/** The job of this server's running in a worktree, if any. */
export const runningIn = (path: string) => inUse.get(path);
/** This process's queue of git work that changes a repository's worktrees, branches or checkout, per repository. */
const repoQueues = new Map<string, Promise<unknown>>();

/**
 * Runs `work` alone on the repository: after this process's earlier work on it, and under a lock
 * in its common git folder that every polyspawn process (two servers may share a project) takes.
 */
export function exclusively<T>(repo: GitPlace, work: () => Promise<T>): Promise<T> {
  const locked = async () => {
    let release: () => Promise<void>;
    try {
      release = await lock(repo.commonDir, {
        lockfilePath: join(repo.commonDir, 'polyspawn.lock'),
        realpath: false,
        // Refreshed while held; a holder that died leaves it stale after 10 s.
        stale: 10_000,
        update: 2_000,
        retries: { retries: 1_000, factor: 1.2, minTimeout: 20, maxTimeout: 500 },
        onCompromised: () => undefined,
      });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error;
      throw new InputError(
        `another polyspawn process kept ${join(repo.commonDir, 'polyspawn.lock')} for minutes: try again once it is done`,
      );
    }
    try {
      return await work();
    } finally {
      await release().catch(() => undefined);
    }
  };
  const before = repoQueues.get(repo.commonDir) ?? Promise.resolve();
  const next = before.then(locked, locked);
  repoQueues.set(
    repo.commonDir,
    next.catch(() => undefined),
  );
  return next;
}

/** The user's repositories, resolved once per project folder: later commands never look for a `.git` again. */
const repositories = new Map<string, GitPlace>();

/**
 * The repository the project is in, from the user's checkout, or an InputError that says what to
 * do: its work tree (the top folder), its git folder and its common folder, real paths.
 */
export async function repositoryOf(projectDir: string): Promise<GitPlace> {
  const known = repositories.get(projectDir);
  if (known) return known;
  const run = await gitDiscover(projectDir, [
    'rev-parse',
    '--path-format=absolute',
    '--show-toplevel',
    '--git-dir',
    '--git-common-dir',
  ]);
  if (run.code !== 0)
    throw new InputError(
      `${projectDir} is not in a git repository (${firstLines(run.stderr, 1)}): run git init and commit, or spawn with isolation "none"`,
    );
  const [workTree, gitDir, commonDir] = run.stdout
    .replace(/\n$/, '')
    .split('\n')
    .map((line) => realpathSync(line));
  // core.worktree can name any folder as the work tree: polyspawn writes only around the project.
  if (!isInside(workTree!, realpathSync(projectDir)))
    throw new InputError(
      `${projectDir} is outside the work tree ${workTree} that its repository names (core.worktree): fix or remove that setting`,
    );
  const repo = { workTree: workTree!, gitDir: gitDir!, commonDir: commonDir! };
  repositories.set(projectDir, repo);
  return repo;
}

/** A linked worktree's git folder: `worktrees/<its folder's name>` in the common folder (checked when made). */
const adminDir = (repo: GitPlace, path: string) => join(repo.commonDir, 'worktrees', basename(path));

/** Where git runs for the worktree at `path`: its own admin folder and the repository's common folder. */
export const worktreeGit = (repo: GitPlace, path: string): GitPlace => ({
  gitDir: adminDir(repo, path),
  commonDir: repo.commonDir,
  workTree: path,
});

/** Keeps polyspawn's worktrees out of the user's `git status`: the folder ignores itself. */
function ignoreWorktrees(stateDir: string): void {
  const dir = join(stateDir, WORKTREES_DIR);
  makeDirs(dir);
  const file = join(dir, '.gitignore');
  if (!existsSync(file)) writeFileSync(file, "# polyspawn: agents' worktrees, never part of the project\n*\n");
}

/** polyspawn's own files (the run store, IAC.md), which never make the user's tree dirty (links resolved). */
export function withoutOwnFiles(top: string, config: WorktreeContext['config'], paths: readonly string[]): string[] {
  const iac = realpathOr(config.iacFile);
  return paths.filter((p) => {
    const full = join(top, p);
    // IAC.md's temp file, there for a moment while a server rewrites IAC.md, is polyspawn's too.
    const own = realpathOr(full) === iac || isTempBeside(iac, full) || isTempBeside(config.iacFile, full);
    return !isInside(config.stateDir, full) && !own;
  });
}

function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

const short = (commit: string) => commit.slice(0, 10);
const listed = (files: readonly string[], max = 5) =>
  files.slice(0, max).join(', ') + (files.length > max ? ` and ${files.length - max} more` : '');

/** Makes (or, for a resumed job, finds again) the job's worktree; an InputError says why it cannot. */
async function openWorktree(ctx: WorktreeContext, job: Readonly<JobRecord>): Promise<OpenWorktree> {
  const { config } = ctx;
  const owner = job.worktreeOf ?? job.id;
  const { path, branch } = worktreePlace(config.stateDir, owner);
  const repo = await repositoryOf(config.projectDir);
  const top = repo.workTree;
  const rel = relative(top, realpathSync(job.cwd));
  if (rel === '..' || rel.startsWith(`..${sep}`))
    throw new InputError(`cwd ${job.cwd} is outside the repository ${top}: a worktree holds only the repository`);
  const holder = inUse.get(path);
  if (holder) throw new InputError(`agent ${holder} is running in the worktree ${path}: wait for it, then resume`);
  ignoreWorktrees(config.stateDir);
  const notes: string[] = [];
  const resumed = job.worktreeOf !== undefined && existsSync(path);
  let base: string;
  if (resumed) {
    base = job.base ?? (await gitOk(worktreeGit(repo, path), ['rev-parse', 'HEAD'])).trim();
  } else {
    const head = await commitOf(repo, job.base ?? 'HEAD');
    if (!head) {
      if (job.base) throw new InputError(`base "${job.base}" names no commit in ${top}: pass a branch, tag or commit`);
      throw new InputError(
        `the repository ${top} has no commit yet (an unborn HEAD): commit first, then spawn with isolation "worktree"`,
      );
    }
    base = head;
    const dirty = withoutOwnFiles(top, config, await allChanges(repo, false));
    if (dirty.length)
      notes.push(
        `your checkout has ${dirty.length} uncommitted change${dirty.length === 1 ? '' : 's'} (${listed(dirty)}): the agent started from ${short(base)} without them`,
      );
    await exclusively(repo, async () => {
      const taken = await branchExists(repo, branch);
      if (taken && job.worktreeOf === undefined) {
        throw new InputError(
          `the branch ${branch} exists already: rename or delete it (git branch -m ${branch} <new name>), then spawn again`,
        );
      }
      if (existsSync(path) || existsSync(adminDir(repo, path))) {
        await git(repo, ['worktree', 'prune']);
        if (existsSync(path) || existsSync(adminDir(repo, path)))
          throw new InputError(
            `the folder ${path} is left from an earlier run (a crash?): remove it (git worktree remove --force "${path}", or delete the folder), then spawn again`,
          );
      }
      // Resuming an agent whose worktree was removed: its branch checked out again in its place,
      // or (integrated, discarded, or no changes) a new one made there.
      if (job.worktreeOf !== undefined)
        notes.push(
          taken
            ? `its worktree was gone: ${branch} is checked out again in its place`
            : `its worktree and branch were gone: made anew from ${short(base)}`,
        );
      await gitOk(repo, ['worktree', 'add', '--quiet', ...(taken ? [path, branch] : ['-b', branch, path, base])]);
      // Its admin folder is named after the folder (no other had that name, above): checked once,
      // before any agent ran, so no later command needs to read the `.git` file there.
      const admin = adminDir(repo, path);
      if (readFileSync(join(admin, 'gitdir'), 'utf8').trim() !== join(realpathSync(path), '.git'))
        throw new Error(`git made the worktree ${path} an admin folder other than ${admin}`);
    });
    if (existsSync(join(path, '.gitmodules')))
      notes.push(
        'the repository has submodules: they are not checked out in the worktree (their folders are empty), and changes in them are not reported',
      );
  }
  const cwd = join(path, rel);
  // A folder the user's checkout has but git does not track (ignored, untracked) is made, empty.
  if (!existsSync(cwd)) mkdirSync(cwd, { recursive: true });
  const startHead = (await gitOk(worktreeGit(repo, path), ['rev-parse', 'HEAD'])).trim();
  return { path, branch, base, ...(notes.length ? { notes } : {}), repo, cwd, startHead };
}

/**
 * Commits what the agent left uncommitted on its branch and reports the changes from the base; a
 * worktree with none is removed with its branch.
 */
async function closeWorktree(
  ctx: WorktreeContext,
  job: Readonly<JobRecord>,
  wt: OpenWorktree,
  state: ExecutionResult['state'],
): Promise<WorktreeChanges> {
  const { path, branch, base } = wt;
  const place = worktreeGit(wt.repo, path);
  const agentHead = (await gitOk(place, ['rev-parse', 'HEAD'])).trim();
  const agentCommitted = agentHead !== wt.startHead;
  const committed = agentCommitted ? await changedFiles(place, wt.startHead, agentHead) : [];
  const uncommitted = await commitLeftovers(ctx, job, place, state);
  const head = (await gitOk(place, ['rev-parse', 'HEAD'])).trim();
  const files = await changedFiles(place, base, head);
  const diffStat = (await gitOk(place, ['diff', ...NO_DIFF_PROGRAMS, '--shortstat', base, head])).trim();
  const removed = files.length === 0;
  if (removed) await removeWorktree(wt.repo, path, branch);
  return { files, committed, uncommitted, agentCommitted, diffStat, head, removed };
}

/** Commits on the worktree's branch what the agent left uncommitted (a commit that names the agent and its task): the files. */
export async function commitLeftovers(
  ctx: WorktreeContext,
  job: Readonly<JobRecord>,
  place: GitPlace,
  state: JobRecord['state'],
): Promise<string[]> {
  // The agent may have moved HEAD (a checkout, or its admin folder's HEAD rewritten) onto your
  // branch or another agent's: polyspawn commits on this worktree's own branch or not at all.
  const { branch } = worktreePlace(ctx.config.stateDir, job.worktreeOf ?? job.id);
  const on = await git(place, ['symbolic-ref', '--quiet', 'HEAD']);
  if (on.code !== 0 || on.stdout.trim() !== `refs/heads/${branch}`)
    throw new Error(
      `the worktree's HEAD is ${on.code === 0 ? `on ${on.stdout.trim()}` : 'detached'}, not on ${branch}: nothing was committed (git -C "${place.workTree}" switch ${branch}, then integrate again)`,
    );
  const uncommitted = await allChanges(place);
  if (uncommitted.length === 0) return [];
  await gitOk(place, ['add', '--all']);
  const who = `${job.agent ? `${job.agent.name} on ` : ''}${job.backend}`;
  const subject = `polyspawn ${job.id} (${who}): ${taskLine(job.prompt, (t) => ctx.secrets.text(t))}`;
  const body = `What agent ${job.id} left uncommitted when it ended (${state}), committed by polyspawn.`;
  await gitOk(place, [...POLYSPAWN_IDENTITY, 'commit', '--no-verify', '--quiet', '-m', subject, '-m', body]);
  return uncommitted;
}

/** The files that differ between two commits. */
export const changedFiles = async (place: GitPlace, from: string, to: string) =>
  nameList(await gitOk(place, ['diff', ...NO_DIFF_PROGRAMS, '--name-only', '-z', from, to]));

/** Removes a worktree and its branch (what is in them is lost). */
async function removeWorktree(repo: GitPlace, path: string, branch: string): Promise<void> {
  await exclusively(repo, () => removeWorktreeNow(repo, path, branch));
}

/** removeWorktree for a caller that holds the repository already (exclusively). */
export async function removeWorktreeNow(repo: GitPlace, path: string, branch: string): Promise<void> {
  if (existsSync(path)) {
    // git refuses a worktree whose `.git` the agent changed or removed: its folder and its admin
    // folder (polyspawn's, by name) are removed here then, links unfollowed.
    const removed = await git(repo, ['worktree', 'remove', '--force', '--force', path]);
    if (removed.code !== 0) {
      rmSync(path, { recursive: true, force: true });
      rmSync(adminDir(repo, path), { recursive: true, force: true });
    }
  } else await git(repo, ['worktree', 'prune']);
  if (await branchExists(repo, branch)) await gitOk(repo, ['branch', '-D', branch]);
}

const ENDED_EARLY: Partial<Record<ExecutionResult['state'], string>> = {
  cancelled: 'was cancelled',
  timed_out: 'timed out',
};

/**
 * Runs isolated jobs in their worktrees: outside the structured-output retry, so both attempts
 * work in the same one. A job whose worktree cannot be made fails with the reason.
 */
export function withWorktree(execute: Executor, ctx: WorktreeContext): Executor {
  return async (job, control) => {
    if (job.isolation !== 'worktree') return execute(job, control);
    let wt: OpenWorktree;
    try {
      wt = await openWorktree(ctx, job);
    } catch (error) {
      const message = `isolation "worktree": ${(error as Error).message}`;
      return { state: 'failed', outcome: { ok: false, text: '', error: message, costSource: 'unknown' } };
    }
    const info: JobWorktree = {
      path: wt.path,
      branch: wt.branch,
      base: wt.base,
      notes: wt.notes,
    };
    control.onWorktree?.(info);
    inUse.set(wt.path, job.id);
    // An engine that shares no files gets the branch as a bundle, and sends the agent's back as one.
    const remote = sharesNoFiles(job.sandbox) ? runFolder(ctx.config.stateDir, job.id).dir : undefined;
    try {
      if (remote) {
        const problem = await bundleBranchIn(wt.repo, wt.branch, remote).then(
          () => undefined,
          (error: Error) => `the job's branch could not be bundled for its engine: ${error.message}`,
        );
        if (problem)
          return { state: 'failed', outcome: { ok: false, text: '', error: problem, costSource: 'unknown' } };
      }
      let result = await execute({ ...job, cwd: wt.cwd }, control);
      if (remote) result = await fetchedBack(wt, remote, result);
      const notes = [...(wt.notes ?? [])];
      try {
        const changes = await closeWorktree(ctx, job, wt, result.state);
        const early = ENDED_EARLY[result.state];
        if (early && !changes.removed)
          notes.push(
            `the agent ${early} before it finished: what it had written is committed on ${wt.branch}; review it before integrating`,
          );
        control.onWorktree?.({ ...info, ...(notes.length ? { notes } : {}), changes });
      } catch (error) {
        notes.push(
          `its changes could not be committed or read (${(error as Error).message}): the worktree is kept as it is`,
        );
        control.onWorktree?.({ ...info, notes });
      }
      return result;
    } finally {
      if (remote) removeBundleIn(remote);
      inUse.delete(wt.path);
    }
  };
}

/** The result once the agent's branch is fetched back onto the worktree; failed, saying why, when it cannot be. */
async function fetchedBack(wt: OpenWorktree, runDir: string, result: ExecutionResult): Promise<ExecutionResult> {
  try {
    await fetchBranchBack(wt.repo, worktreeGit(wt.repo, wt.path), wt.branch, wt.startHead, runDir);
    return result;
  } catch (error) {
    return { ...result, state: 'failed', outcome: { ...result.outcome, ok: false, error: (error as Error).message } };
  }
}

/** A worktree polyspawn left in the project: kept for its changes, or by an interrupted run. */
export type LeftoverWorktree = { id: string; path: string; branch: string };

/** The worktrees in <state_dir>/worktrees (a folder per job that owns one). */
export function leftoverWorktrees(stateDir: string): LeftoverWorktree[] {
  let names: string[];
  try {
    names = readdirSync(join(stateDir, WORKTREES_DIR), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
  } catch {
    return [];
  }
  return names.map((id) => ({ id, ...worktreePlace(stateDir, id) }));
}
