// integrate(agent_id, how): bring an isolated agent's branch back. merge and cherry-pick change the
// user's current branch, and only when it is on a branch, its tracked files are clean and the
// branch overwrites no file git does not track or see there (an ignored one, an assume-unchanged
// one); on a conflict they are aborted, so nothing is changed, and the conflicting files are
// named. One integrate at a time per repository, across processes. patch returns the diff and
// applies nothing; discard removes the worktree and the branch.
import { existsSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { InputError } from '../../lib/errors.js';
import { taskLine } from '../../lib/text.js';
import { isFinished, type JobRecord, type JobTable } from '../table.js';
import {
  branchExists,
  commitOf,
  firstLines,
  git,
  gitOk,
  nameList,
  NO_DIFF_PROGRAMS,
  POLYSPAWN_IDENTITY,
  trackedChanges,
  type GitPlace,
} from './git.js';
import { worktreePlace } from './report.js';
import {
  changedFiles,
  commitLeftovers,
  exclusively,
  removeWorktreeNow,
  repositoryOf,
  runningIn,
  withoutOwnFiles,
  worktreeGit,
  type WorktreeContext,
} from './worktree.js';

export const INTEGRATE_MODES = ['merge', 'cherry-pick', 'patch', 'discard'] as const;
export type IntegrateMode = (typeof INTEGRATE_MODES)[number];

export type Integration = {
  agentId: string;
  how: IntegrateMode;
  branch: string;
  base: string;
  /** The files the branch changes from its base. */
  files: string[];
  /** merge, cherry-pick: the commits now on the user's branch, newest first (`<sha> <subject>`). */
  commits?: string[];
  /** patch: the diff from the base. */
  patch?: string;
  /** The patch was longer than this many characters and was cut (the command for the whole is in `note`). */
  patchCut?: number;
  /** Whether the worktree and the branch were removed (all but patch). */
  removed: boolean;
  note?: string;
};

/** A patch returned whole up to this size; a longer one is cut, with the git command for it. */
const MAX_PATCH_CHARS = 200_000;

type IntegrateContext = WorktreeContext & { jobs: Pick<JobTable, 'get'> };

export async function integrate(ctx: IntegrateContext, id: string, how: IntegrateMode): Promise<Integration> {
  const job = ctx.jobs.get(id);
  if (!job) throw new InputError(`no agent with id "${id}": call \`list\` to see the ids of current and recent agents`);
  if (job.isolation !== 'worktree')
    throw new InputError(`agent ${id} did not run in a worktree: its changes are in your checkout already`);
  if (!isFinished(job.state))
    throw new InputError(`agent ${id} is ${job.state}: wait for it to finish (wait_for_agents), then integrate`);
  const repo = await repositoryOf(ctx.config.projectDir);
  // One integrate at a time in a repository, across processes: each merge sees the last one done.
  return exclusively(repo, () => integrateNow(ctx, repo, job, how));
}

async function integrateNow(
  ctx: IntegrateContext,
  repo: GitPlace,
  job: Readonly<JobRecord>,
  how: IntegrateMode,
): Promise<Integration> {
  const id = job.id;
  const owner = job.worktreeOf ?? id;
  const { path, branch } = worktreePlace(ctx.config.stateDir, owner);
  const busy = runningIn(path);
  if (busy) throw new InputError(`agent ${busy} is running in this worktree now: wait for it, then integrate`);
  if (!(await branchExists(repo, branch)))
    throw new InputError(
      `agent ${id}'s branch ${branch} is gone: it was integrated or discarded already, or the agent changed nothing`,
    );
  // A run that was interrupted left its work uncommitted: it becomes a commit first.
  if (how !== 'discard' && existsSync(path)) await commitLeftovers(ctx, job, worktreeGit(repo, path), job.state);
  const base = job.worktree?.base ?? (await gitOk(repo, ['merge-base', 'HEAD', branch])).trim();
  const files = await changedFiles(repo, base, branch);
  const done = { agentId: id, how, branch, base, files };
  if (how === 'patch') {
    const patch = await gitOk(repo, ['diff', ...NO_DIFF_PROGRAMS, '--no-color', '--binary', base, branch]);
    if (patch.length <= MAX_PATCH_CHARS) return { ...done, patch, removed: false };
    return {
      ...done,
      patch: patch.slice(0, MAX_PATCH_CHARS),
      patchCut: patch.length - MAX_PATCH_CHARS,
      removed: false,
      note: `the patch is cut: the whole is \`git diff --binary ${base} ${branch}\``,
    };
  }
  if (how === 'discard') {
    await removeWorktreeNow(repo, path, branch);
    return { ...done, removed: true };
  }
  const before = await commitOf(repo, 'HEAD');
  if (!before) throw new InputError(`your repository ${repo.workTree} has no commit yet: commit first, then integrate`);
  await refuseUnsafeCheckout(ctx, repo, before, branch);
  await refuseOverwrites(repo, base, branch);
  // The user's own identity when git has one; else polyspawn's, so the commit can be made.
  const identity = (await git(repo, ['var', 'GIT_COMMITTER_IDENT'])).code === 0 ? [] : POLYSPAWN_IDENTITY;
  const tip = (await gitOk(repo, ['rev-parse', '--verify', `refs/heads/${branch}^{commit}`])).trim();
  if (how === 'merge') {
    const message = `Merge ${branch}: agent ${id} (${job.backend}): ${taskLine(job.prompt, (t) => ctx.secrets.text(t))}`;
    const run = await git(repo, [...identity, 'merge', '--no-ff', '--no-edit', '-m', message, tip]);
    if (run.code !== 0) await undo(ctx, repo, before, 'merge', branch, run.stderr || run.stdout);
  } else {
    const commits = (await gitOk(repo, ['rev-list', '--reverse', `${base}..${tip}`])).split('\n').filter(Boolean);
    const run = await git(repo, [...identity, 'cherry-pick', '--allow-empty', ...commits]);
    if (run.code !== 0) await undo(ctx, repo, before, 'cherry-pick', branch, run.stderr || run.stdout);
  }
  const commits = (await gitOk(repo, ['log', '--no-show-signature', '--format=%h %s', `${before}..HEAD`]))
    .split('\n')
    .filter(Boolean);
  await removeWorktreeNow(repo, path, branch);
  return { ...done, commits, removed: true };
}

/** What git leaves in the git folder while a merge, a cherry-pick, a revert or a rebase is under way. */
const UNDER_WAY = ['MERGE_HEAD', 'CHERRY_PICK_HEAD', 'REVERT_HEAD', 'rebase-merge', 'rebase-apply', 'sequencer'];

/**
 * merge and cherry-pick need the checkout on a branch (on a detached HEAD the commits would be on
 * none, and the agent's branch is deleted after) other than the agent's, with no operation under way and no
 * uncommitted change to a tracked file (polyspawn's own files aside).
 */
async function refuseUnsafeCheckout(
  ctx: IntegrateContext,
  repo: GitPlace,
  head: string,
  branch: string,
): Promise<void> {
  const on = await git(repo, ['symbolic-ref', '--quiet', 'HEAD']);
  if (on.code !== 0)
    throw new InputError(
      `your checkout is on a detached HEAD (${head.slice(0, 10)}), so the commits would be on no branch: check out the branch to bring the work into (git switch <branch>), then integrate again, or take how "patch"`,
    );
  if (on.stdout.trim() === `refs/heads/${branch}`)
    throw new InputError(
      `your checkout is on ${branch}, the agent's own branch, which integrating removes: check out the branch to bring the work into (git switch <branch>), then integrate again`,
    );
  const underWay = UNDER_WAY.find((name) => existsSync(join(repo.gitDir, name)));
  if (underWay)
    throw new InputError(
      `a git operation is under way in your checkout (${underWay} in ${repo.gitDir}): finish or abort it (git merge --abort, git cherry-pick --abort, git rebase --abort), then integrate again`,
    );
  const dirty = withoutOwnFiles(repo.workTree, ctx.config, await trackedChanges(repo));
  if (dirty.length)
    throw new InputError(
      `your checkout has uncommitted changes to tracked files (${dirty.slice(0, 10).join(', ')}): commit or stash them, then integrate again (or take how "patch", which changes nothing)`,
    );
}

/**
 * git overwrites an ignored file in the way of a merge without a word: every path the branch
 * writes (in the whole change, and in each commit, as a cherry-pick writes them in turn) must be
 * tracked in the checkout or absent from it, and no file may stand where it needs a folder.
 */
async function refuseOverwrites(repo: GitPlace, base: string, branch: string): Promise<void> {
  const mergeBase = (await gitOk(repo, ['merge-base', 'HEAD', branch])).trim();
  const paths = ['--no-renames', '--name-only', '-z'];
  const written = new Set([
    ...nameList(await gitOk(repo, ['diff', ...NO_DIFF_PROGRAMS, ...paths, mergeBase, branch])),
    ...nameList(await gitOk(repo, ['log', ...NO_DIFF_PROGRAMS, ...paths, '--format=', `${base}..${branch}`])),
  ]);
  // Every path git does not track, ignored ones included (no exclude given), a whole folder as `name/`.
  const untracked = new Set(nameList(await gitOk(repo, ['ls-files', '-z', '--others', '--directory'])));
  const lost = [...written].filter((file) => inTheWay(untracked, repo.workTree, file)).sort();
  if (lost.length)
    throw new InputError(
      `${branch} writes ${listed(lost)}, which your checkout has but git does not track (an ignored or untracked file): integrating would overwrite it. Move it away or commit it, then integrate again, or take how "patch"`,
    );
  // A tracked file marked assume-unchanged or skip-worktree hides its changes from git, whose
  // merge then writes over them (a failed one too): such a file on disk is refused as well.
  const hidden = flaggedFiles(await gitOk(repo, ['ls-files', '-v', '-z'])).filter(
    (file) => written.has(file) && lstatSync(join(repo.workTree, file), { throwIfNoEntry: false }),
  );
  if (hidden.length)
    throw new InputError(
      `${branch} writes ${listed(hidden)}, which your index marks assume-unchanged or skip-worktree, so git would not see your changes to it before overwriting them: clear the mark (git update-index --no-assume-unchanged --no-skip-worktree <file>) and commit or stash, then integrate again, or take how "patch"`,
    );
}

const listed = (files: readonly string[]) =>
  files.slice(0, 10).join(', ') + (files.length > 10 ? ` and ${files.length - 10} more` : '');

/** The files `git ls-files -v -z` tags assume-unchanged (a lower-case tag) or skip-worktree (S). */
function flaggedFiles(lsFilesVZ: string): string[] {
  return nameList(lsFilesVZ)
    .filter((entry) => entry[0] === 'S' || (entry[0]! >= 'a' && entry[0]! <= 'z'))
    .map((entry) => entry.slice(2));
}

/** Whether writing `file` would replace something of the checkout's that git does not track. */
function inTheWay(untracked: ReadonlySet<string>, top: string, file: string): boolean {
  if (untracked.has(file) || untracked.has(`${file}/`)) return true;
  const parts = file.split('/');
  for (let i = 1; i < parts.length; i++) {
    const folder = parts.slice(0, i).join('/');
    // A file (or a link) where the branch has a folder.
    if (untracked.has(folder)) return true;
    // Inside a folder git does not track at all: in the way only if the file is there.
    if (untracked.has(`${folder}/`)) return lstatSync(join(top, file), { throwIfNoEntry: false }) !== undefined;
  }
  return false;
}

/**
 * A merge or cherry-pick that stopped: aborted, so the user's tree is as it was; the error names
 * the conflicts. The repository is held (exclusively) and nothing was under way before, so what is
 * under way now is this operation, and only it is aborted; "nothing was changed" is checked.
 */
async function undo(
  ctx: IntegrateContext,
  repo: GitPlace,
  before: string,
  op: 'merge' | 'cherry-pick',
  branch: string,
  said: string,
): Promise<never> {
  const conflicts = nameList(await gitOk(repo, ['diff', ...NO_DIFF_PROGRAMS, '--name-only', '-z', '--diff-filter=U']));
  const marker = op === 'merge' ? ['MERGE_HEAD'] : ['CHERRY_PICK_HEAD', 'sequencer'];
  if (marker.some((name) => existsSync(join(repo.gitDir, name)))) await gitOk(repo, [op, '--abort']);
  const unchanged =
    (await commitOf(repo, 'HEAD')) === before &&
    withoutOwnFiles(repo.workTree, ctx.config, await trackedChanges(repo)).length === 0;
  if (!unchanged)
    throw new InputError(
      `git ${op} of ${branch} stopped (${firstLines(said)}) and your checkout could not be put back as it was: see git status`,
    );
  if (conflicts.length)
    throw new InputError(
      `${branch} conflicts with your branch in ${conflicts.join(', ')}: nothing was changed (${op} --abort). ` +
        'Take how "patch" and apply it by hand, or resume the agent to rework its change, then integrate again',
    );
  throw new InputError(`git ${op} of ${branch} stopped (${firstLines(said)}): nothing was changed`);
}
