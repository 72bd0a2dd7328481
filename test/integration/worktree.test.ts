// isolation: "worktree" against real git: the job table with withWorktree over a scripted executor
// that writes files where it is told to work, in a project on a path with spaces.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { isolatedRequest, userGit as sh } from '../helpers/git.js';
import type { Outcome } from '../../backends/types.js';
import { JobTable, type Executor, type JobRecord, type JobRequest } from '../../src/jobs/table.js';
import { integrate } from '../../src/jobs/worktree/integrate.js';
import { overlapsAmong, siblingOverlaps, worktreePlace } from '../../src/jobs/worktree/report.js';
import { leftoverWorktrees, withWorktree } from '../../src/jobs/worktree/worktree.js';
import { Redactor } from '../../src/lib/redact.js';

const ok: Outcome = { ok: true, text: 'done', costSource: 'unknown' };

let root: string;
let project: string;
let stateDir: string;

function makeRepo(): void {
  sh(project, 'init', '-q', '-b', 'main');
  writeFileSync(join(project, 'app.txt'), 'one\n');
  mkdirSync(join(project, 'src'));
  writeFileSync(join(project, 'src', 'lib.txt'), 'lib\n');
  sh(project, 'add', '.');
  sh(project, 'commit', '-q', '-m', 'first');
}

/**
 * The prompt scripts the executor: `write FILE TEXT` lines are written in its working folder,
 * `hold` waits until the run is aborted, `commit` commits as the agent.
 */
const scripted: Executor = async (job, { signal }) => {
  for (const line of job.prompt.split('\n')) {
    const [verb, file, ...text] = line.split(' ');
    if (verb === 'write') {
      mkdirSync(join(job.cwd, file!, '..'), { recursive: true });
      writeFileSync(join(job.cwd, file!), `${text.join(' ')}\n`);
    }
    if (verb === 'commit') sh(job.cwd, 'commit', '-q', '-a', '-m', 'agent commit');
    if (verb === 'hold') await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  }
  if (signal.aborted) return { state: 'cancelled', outcome: { ...ok, ok: false, error: 'cancelled' } };
  return { state: 'succeeded', outcome: { ...ok, text: `ran in ${job.cwd}` } };
};

let table: JobTable;
const ctx = () => ({
  config: { projectDir: project, stateDir, iacFile: join(project, 'IAC.md') },
  secrets: new Redactor(),
});

const request = (prompt: string, more: Partial<JobRequest> = {}) => isolatedRequest(project, prompt, more);
const submit = (prompt: string, more: Partial<JobRequest> = {}) => table.submit(request(prompt, more));

async function finish(...jobs: JobRecord[]): Promise<JobRecord[]> {
  const { pending } = await table.waitFor(
    jobs.map((j) => j.id),
    { timeoutMs: 60_000, mode: 'all' },
  );
  expect(pending).toEqual([]);
  return jobs.map((j) => table.get(j.id)!);
}

const userStatus = () => sh(project, 'status', '--porcelain', '--untracked-files=all');

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'polyspawn worktree '));
  project = join(root, 'my project');
  mkdirSync(project);
  stateDir = join(project, '.polyspawn');
  table = new JobTable({ concurrency: 4, execute: withWorktree(scripted, ctx()) });
});
afterEach(async () => {
  await table.shutdown();
  rmSync(root, { recursive: true, force: true });
});

describe('agents in worktrees', () => {
  test('three in parallel write one file name: the checkout is untouched, each branch has its own change, the overlap is reported', async () => {
    makeRepo();
    const jobs = await finish(
      submit('write notes.txt from a\nwrite a-only.txt a'),
      submit('write notes.txt from b'),
      submit('write notes.txt from c'),
    );
    expect(jobs.map((j) => j.state)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(userStatus()).toBe('');
    expect(existsSync(join(project, 'notes.txt'))).toBe(false);
    const base = sh(project, 'rev-parse', 'HEAD').trim();
    for (const [job, who] of jobs.map((j, i) => [j, 'abc'[i]] as const)) {
      const { path, branch } = worktreePlace(stateDir, job.id);
      expect(job.worktree).toMatchObject({ path, branch, base });
      expect(job.worktree!.changes).toMatchObject({ agentCommitted: false, removed: false });
      expect(job.worktree!.changes!.uncommitted).toContain('notes.txt');
      expect(sh(project, 'show', `${branch}:notes.txt`)).toBe(`from ${who}\n`);
      // The commit names the agent and its task; polyspawn made it, not the user's identity.
      expect(sh(project, 'log', '-1', '--format=%an|%s', branch)).toBe(
        `polyspawn|polyspawn ${job.id} (codex): write notes.txt from ${who}\n`,
      );
      expect(job.outcome!.text).toBe(`ran in ${path}`);
    }
    expect(jobs[0]!.worktree!.changes!.files).toEqual(['a-only.txt', 'notes.txt']);
    expect(jobs[0]!.worktree!.changes!.diffStat).toMatch(/^2 files changed, 2 insertions\(\+\)$/);
    expect(overlapsAmong(jobs)).toEqual([{ file: 'notes.txt', agentIds: jobs.map((j) => j.id) }]);
    // Seen from one of them: itself first, then its siblings.
    const [a, b, c] = jobs.map((j) => j.id);
    expect(siblingOverlaps(jobs[1]!, jobs)).toEqual([{ file: 'notes.txt', agentIds: [b, a, c] }]);
    // The worktrees never show in the user's status; polyspawn's own branches are all it added.
    expect(sh(project, 'branch', '--format=%(refname:short)').split('\n').filter(Boolean).sort()).toEqual(
      ['main', ...jobs.map((j) => `polyspawn/${j.id}`)].sort(),
    );
    expect(leftoverWorktrees(stateDir).map((w) => w.id)).toEqual(jobs.map((j) => j.id).sort());
  });

  test('merge brings a branch into the checkout; a second that conflicts changes nothing and names the file', async () => {
    makeRepo();
    const [a, b] = await finish(submit('write app.txt from a'), submit('write app.txt from b'));
    const merged = await integrate({ ...ctx(), jobs: table }, a!.id, 'merge');
    expect(merged).toMatchObject({ files: ['app.txt'], removed: true });
    expect(merged.commits![0]).toMatch(new RegExp(`Merge polyspawn/${a!.id}: agent ${a!.id}`));
    expect(readFileSync(join(project, 'app.txt'), 'utf8')).toBe('from a\n');
    expect(existsSync(a!.worktree!.path)).toBe(false);
    expect(sh(project, 'branch', '--list', `polyspawn/${a!.id}`)).toBe('');

    const head = sh(project, 'rev-parse', 'HEAD');
    await expect(integrate({ ...ctx(), jobs: table }, b!.id, 'merge')).rejects.toThrow(
      /conflicts with your branch in app\.txt: nothing was changed/,
    );
    expect(sh(project, 'rev-parse', 'HEAD')).toBe(head);
    expect(userStatus()).toBe('');
    expect(existsSync(join(project, '.git', 'MERGE_HEAD'))).toBe(false);
    // Still there to be taken another way.
    const patch = await integrate({ ...ctx(), jobs: table }, b!.id, 'patch');
    expect(patch.patch).toContain('+from b');
    expect(patch.removed).toBe(false);
    const gone = await integrate({ ...ctx(), jobs: table }, b!.id, 'discard');
    expect(gone.removed).toBe(true);
    expect(existsSync(b!.worktree!.path)).toBe(false);
    expect(sh(project, 'branch', '--list', `polyspawn/${b!.id}`)).toBe('');
    await expect(integrate({ ...ctx(), jobs: table }, b!.id, 'merge')).rejects.toThrow(/is gone/);
  });

  test('merge and cherry-pick refuse a checkout with tracked changes; polyspawn’s own files do not count', async () => {
    makeRepo();
    writeFileSync(join(project, 'IAC.md'), 'record\n');
    sh(project, 'add', 'IAC.md');
    sh(project, 'commit', '-q', '-m', 'tracks IAC.md');
    const [a] = await finish(submit('write new.txt a'));
    writeFileSync(join(project, 'IAC.md'), 'rewritten by polyspawn\n');
    writeFileSync(join(project, 'app.txt'), 'edited by the user\n');
    for (const how of ['merge', 'cherry-pick'] as const)
      await expect(integrate({ ...ctx(), jobs: table }, a!.id, how)).rejects.toThrow(
        /uncommitted changes to tracked files \(app\.txt\)/,
      );
    sh(project, 'checkout', '--', 'app.txt');
    writeFileSync(join(project, 'untracked.txt'), 'not counted\n');
    const picked = await integrate({ ...ctx(), jobs: table }, a!.id, 'cherry-pick');
    expect(picked.commits).toHaveLength(1);
    expect(readFileSync(join(project, 'new.txt'), 'utf8')).toBe('a\n');
  });

  test('an agent that changes nothing leaves no worktree nor branch; one that commits itself is reported so', async () => {
    makeRepo();
    const [idle, committer] = await finish(submit('nothing to do'), submit('write app.txt two\ncommit'));
    expect(idle!.worktree!.changes).toMatchObject({ files: [], removed: true });
    expect(existsSync(idle!.worktree!.path)).toBe(false);
    expect(sh(project, 'branch', '--list', `polyspawn/${idle!.id}`)).toBe('');
    expect(committer!.worktree!.changes).toMatchObject({
      agentCommitted: true,
      committed: ['app.txt'],
      uncommitted: [],
      files: ['app.txt'],
    });
  });

  test('a cwd subfolder keeps its place in the worktree; a dirty checkout is said, not copied', async () => {
    makeRepo();
    writeFileSync(join(project, 'app.txt'), 'uncommitted\n');
    const [job] = await finish(submit('write here.txt x', { cwd: join(project, 'src') }));
    expect(job!.outcome!.text).toBe(`ran in ${join(job!.worktree!.path, 'src')}`);
    expect(job!.worktree!.changes!.files).toEqual(['src/here.txt']);
    expect(job!.worktree!.notes![0]).toMatch(
      /your checkout has 1 uncommitted change \(app\.txt\): the agent started from/,
    );
    expect(readFileSync(join(job!.worktree!.path, 'app.txt'), 'utf8')).toBe('one\n');
  });

  test('a detached HEAD works (a branch from its commit); a base ref is taken', async () => {
    makeRepo();
    const first = sh(project, 'rev-parse', 'HEAD').trim();
    writeFileSync(join(project, 'app.txt'), 'two\n');
    sh(project, 'commit', '-q', '-am', 'second');
    sh(project, 'checkout', '-q', '--detach', 'HEAD');
    const [detached, based] = await finish(submit('write d.txt d'), submit('write e.txt e', { base: first }));
    expect(detached!.state).toBe('succeeded');
    expect(detached!.worktree!.base).toBe(sh(project, 'rev-parse', 'HEAD').trim());
    expect(based!.worktree!.base).toBe(first);
    expect(readFileSync(join(based!.worktree!.path, 'app.txt'), 'utf8')).toBe('one\n');
  });

  test('faults: not a repository, an unborn HEAD, a branch name taken, a folder left by a crash', async () => {
    const [notRepo] = await finish(submit('write x.txt x'));
    expect(notRepo!.state).toBe('failed');
    expect(notRepo!.outcome!.error).toMatch(/^isolation "worktree": .* is not in a git repository/);

    sh(project, 'init', '-q', '-b', 'main');
    const [unborn] = await finish(submit('write x.txt x'));
    expect(unborn!.outcome!.error).toMatch(/no commit yet \(an unborn HEAD\): commit first/);

    writeFileSync(join(project, 'app.txt'), 'one\n');
    sh(project, 'add', '.');
    sh(project, 'commit', '-q', '-m', 'first');
    // A job's id is known once submitted: these executors take its branch, or leave its folder, first.
    const taken = new JobTable({
      concurrency: 1,
      execute: async (job, control) => {
        sh(project, 'branch', `polyspawn/${job.id}`);
        return withWorktree(scripted, ctx())(job, control);
      },
    });
    const branchJob = taken.submit(request('write y.txt y'));
    const left = new JobTable({
      concurrency: 1,
      execute: async (job, control) => {
        mkdirSync(worktreePlace(stateDir, job.id).path, { recursive: true });
        return withWorktree(scripted, ctx())(job, control);
      },
    });
    const folderJob = left.submit(request('write z.txt z'));
    await taken.waitFor([branchJob.id], { timeoutMs: 60_000, mode: 'all' });
    await left.waitFor([folderJob.id], { timeoutMs: 60_000, mode: 'all' });
    expect(taken.get(branchJob.id)!.outcome!.error).toMatch(
      /the branch polyspawn\/\w+ exists already: rename or delete it/,
    );
    expect(left.get(folderJob.id)!.outcome!.error).toMatch(/is left from an earlier run \(a crash\?\): remove it/);
    expect(userStatus()).toBe('');
  });

  test('cancelled mid-write: what it wrote is committed on its branch and the worktree stays, marked', async () => {
    makeRepo();
    const job = submit('write half.txt partial\nhold');
    const { path } = worktreePlace(stateDir, job.id);
    await expect.poll(() => existsSync(join(path, 'half.txt')), { timeout: 30_000 }).toBe(true);
    await table.cancel(job.id);
    const done = table.get(job.id)!;
    expect(done.state).toBe('cancelled');
    expect(done.worktree!.changes).toMatchObject({ files: ['half.txt'], removed: false });
    expect(done.worktree!.notes!.join()).toMatch(/was cancelled before it finished: what it had written is committed/);
    expect(existsSync(path)).toBe(true);
  });

  test('a resumed job continues in the worktree and on the branch of the job it resumes', async () => {
    makeRepo();
    const [first] = await finish(submit('write one.txt 1'));
    const [second] = await finish(submit('write two.txt 2', { worktreeOf: first!.id, base: first!.worktree!.base }));
    expect(second!.worktree).toMatchObject({ path: first!.worktree!.path, branch: `polyspawn/${first!.id}` });
    expect(second!.worktree!.changes!.files).toEqual(['one.txt', 'two.txt']);
    expect(sh(project, 'log', '--format=%s', `polyspawn/${first!.id}`).split('\n')).toHaveLength(4);
    // Its folder removed by hand, its branch kept: the branch is checked out there again.
    sh(project, 'worktree', 'remove', '--force', first!.worktree!.path);
    const [third] = await finish(submit('write three.txt 3', { worktreeOf: first!.id, base: first!.worktree!.base }));
    expect(third!.worktree!.notes).toEqual([
      `its worktree was gone: polyspawn/${first!.id} is checked out again in its place`,
    ]);
    expect(third!.worktree!.changes!.files).toEqual(['one.txt', 'three.txt', 'two.txt']);
    // Integrating the resumed job brings the whole branch.
    const merged = await integrate({ ...ctx(), jobs: table }, third!.id, 'merge');
    expect(merged.files).toEqual(['one.txt', 'three.txt', 'two.txt']);
    // Integrated and gone: resuming makes a new one in its place, from the earlier base.
    const [fourth] = await finish(submit('write four.txt 4', { worktreeOf: first!.id, base: first!.worktree!.base }));
    expect(fourth!.worktree!.notes![0]).toMatch(/^its worktree and branch were gone: made anew from /);
    expect(fourth!.worktree!.changes!.files).toEqual(['four.txt']);
  });

  test('two resumes of one worktree at once: the second fails and names the agent in it', async () => {
    makeRepo();
    const [first] = await finish(submit('write one.txt 1'));
    const again = { worktreeOf: first!.id, base: first!.worktree!.base };
    const holder = submit('write two.txt 2\nhold', again);
    await expect.poll(() => existsSync(join(first!.worktree!.path, 'two.txt')), { timeout: 30_000 }).toBe(true);
    const [second] = await finish(submit('write three.txt 3', again));
    expect(second!.outcome!.error).toBe(
      `isolation "worktree": agent ${holder.id} is running in the worktree ${first!.worktree!.path}: wait for it, then resume`,
    );
    await table.cancel(holder.id);
  });

  test('submodules are not checked out, and the result says so', async () => {
    makeRepo();
    const lib = join(root, 'lib repo');
    mkdirSync(lib);
    sh(lib, 'init', '-q', '-b', 'main');
    writeFileSync(join(lib, 'lib.txt'), 'lib\n');
    sh(lib, 'add', '.');
    sh(lib, 'commit', '-q', '-m', 'lib');
    sh(project, '-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', lib, 'vendor/lib');
    sh(project, 'commit', '-q', '-m', 'a submodule');
    const [job] = await finish(submit('write x.txt x'));
    expect(job!.state).toBe('succeeded');
    expect(job!.worktree!.notes).toEqual([
      expect.stringMatching(/^the repository has submodules: they are not checked out/),
    ]);
    expect(job!.worktree!.changes!.files).toEqual(['x.txt']);
  });

  test('git missing: the job fails and says to install git', async () => {
    makeRepo();
    const path = process.env.PATH;
    process.env.PATH = join(root, 'no-bin-here');
    try {
      const [job] = await finish(submit('write x.txt x'));
      expect(job!.outcome!.error).toBe(
        'isolation "worktree": git is not installed (or not on PATH): install git to run agents in worktrees',
      );
    } finally {
      process.env.PATH = path;
    }
  });

  test("no hook of the user's runs for what polyspawn does (worktree add, commit, merge)", async () => {
    makeRepo();
    const marker = join(root, 'hooks ran');
    const hooks = join(project, '.git', 'hooks');
    for (const hook of ['post-checkout', 'pre-commit', 'commit-msg', 'post-commit', 'pre-merge-commit', 'post-merge']) {
      writeFileSync(join(hooks, hook), `#!/bin/sh\necho ${hook} >> "${marker}"\nexit 1\n`, { mode: 0o755 });
    }
    const [job] = await finish(submit('write hooked.txt x'));
    expect(job!.state).toBe('succeeded');
    await integrate({ ...ctx(), jobs: table }, job!.id, 'merge');
    expect(readFileSync(join(project, 'hooked.txt'), 'utf8')).toBe('x\n');
    expect(existsSync(marker)).toBe(false);
  });
});
