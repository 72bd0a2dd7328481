// integrate(agent_id, how): bring an isolated agent's branch back. merge and cherry-pick change the
// user's current branch, and only when its tracked files are clean; on a conflict they are
// aborted, so nothing is changed, and the conflicting files are named. patch returns the diff and
// applies nothing; discard removes the worktree and the branch.
import { existsSync } from 'node:fs';
import { InputError } from '../../lib/errors.js';
import { taskLine } from '../../lib/text.js';
import { isFinished, type JobTable } from '../table.js';
import { branchExists, commitOf, firstLines, git, gitOk, nameList, POLYSPAWN_IDENTITY, trackedChanges } from './git.js';
import { worktreePlace } from './report.js';
import {
  commitLeftovers,
  removeWorktree,
  repositoryOf,
  runningIn,
  withoutOwnFiles,
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

export type IntegrateContext = WorktreeContext & { jobs: Pick<JobTable, 'get'> };

export async function integrate(ctx: IntegrateContext, id: string, how: IntegrateMode): Promise<Integration> {
  const job = ctx.jobs.get(id);
  if (!job) throw new InputError(`no agent with id "${id}": call \`list\` to see the ids of current and recent agents`);
  if (job.isolation !== 'worktree')
    throw new InputError(`agent ${id} did not run in a worktree: its changes are in your checkout already`);
  if (!isFinished(job.state))
    throw new InputError(`agent ${id} is ${job.state}: wait for it to finish (wait_for_agents), then integrate`);
  const owner = job.worktreeOf ?? id;
  const { path, branch } = worktreePlace(ctx.config.stateDir, owner);
  const busy = runningIn(path);
  if (busy) throw new InputError(`agent ${busy} is running in this worktree now: wait for it, then integrate`);
  const top = await repositoryOf(ctx.config.projectDir);
  if (!(await branchExists(top, branch)))
    throw new InputError(
      `agent ${id}'s branch ${branch} is gone: it was integrated or discarded already, or the agent changed nothing`,
    );
  // A run that was interrupted left its work uncommitted: it becomes a commit first.
  if (how !== 'discard' && existsSync(path)) await commitLeftovers(ctx, job, path, job.state);
  const base = job.worktree?.base ?? (await gitOk(top, ['merge-base', 'HEAD', branch])).trim();
  const files = nameList(await gitOk(top, ['diff', '--name-only', '-z', base, branch]));
  const done = { agentId: id, how, branch, base, files };
  if (how === 'patch') {
    const patch = await gitOk(top, ['diff', '--binary', base, branch]);
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
    await removeWorktree(top, path, branch);
    return { ...done, removed: true };
  }
  const before = await commitOf(top, 'HEAD');
  if (!before) throw new InputError(`your repository ${top} has no commit yet: commit first, then integrate`);
  const dirty = withoutOwnFiles(top, ctx.config, await trackedChanges(top));
  if (dirty.length)
    throw new InputError(
      `your checkout has uncommitted changes to tracked files (${dirty.slice(0, 10).join(', ')}): commit or stash them, then integrate again (or take how "patch", which changes nothing)`,
    );
  // The user's own identity when git has one; else polyspawn's, so the commit can be made.
  const identity = (await git(top, ['var', 'GIT_COMMITTER_IDENT'])).code === 0 ? [] : POLYSPAWN_IDENTITY;
  if (how === 'merge') {
    const message = `Merge ${branch}: agent ${id} (${job.backend}): ${taskLine(job.prompt, (t) => ctx.secrets.text(t))}`;
    const run = await git(top, [...identity, 'merge', '--no-ff', '--no-edit', '-m', message, branch]);
    if (run.code !== 0) await undo(top, 'MERGE_HEAD', ['merge', '--abort'], branch, run.stderr || run.stdout);
  } else {
    const commits = (await gitOk(top, ['rev-list', '--reverse', `${base}..${branch}`])).split('\n').filter(Boolean);
    const run = await git(top, [...identity, 'cherry-pick', '--allow-empty', ...commits]);
    if (run.code !== 0)
      await undo(top, 'CHERRY_PICK_HEAD', ['cherry-pick', '--abort'], branch, run.stderr || run.stdout);
  }
  const commits = (await gitOk(top, ['log', '--format=%h %s', `${before}..HEAD`])).split('\n').filter(Boolean);
  await removeWorktree(top, path, branch);
  return { ...done, commits, removed: true };
}

/** A merge or cherry-pick that stopped: aborted, so the user's tree is as it was; the error names the conflicts. */
async function undo(top: string, marker: string, abort: string[], branch: string, said: string): Promise<never> {
  const conflicts = nameList(await gitOk(top, ['diff', '--name-only', '-z', '--diff-filter=U']));
  if (await commitOf(top, marker)) await gitOk(top, abort);
  if (conflicts.length)
    throw new InputError(
      `${branch} conflicts with your branch in ${conflicts.join(', ')}: nothing was changed (${abort.join(' ')}). ` +
        'Take how "patch" and apply it by hand, or resume the agent to rework its change, then integrate again',
    );
  throw new InputError(`git ${abort[0]} of ${branch} stopped (${firstLines(said)}): nothing was changed`);
}
