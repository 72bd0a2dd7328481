// isolation "worktree" against a hostile agent and an unlucky checkout, with real git: every git
// command polyspawn runs (worktree open, the changes read, the end-of-run commit, each integrate
// mode) runs none of the programs an agent named in `.git/config`, in a `.gitattributes`, in a git
// folder it built and pointed its worktree at, or in a promisor remote; integrate refuses to
// overwrite a file git does not track, refuses a detached HEAD, and six at once leave the
// repository clean.
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { isolatedRequest, userGit as sh } from '../helpers/git.js';
import { JobTable, type Executor, type JobRecord } from '../../src/jobs/table.js';
import { integrate, type IntegrateMode, type Integration } from '../../src/jobs/worktree/integrate.js';
import { worktreePlace } from '../../src/jobs/worktree/report.js';
import { repositoryOf, withWorktree } from '../../src/jobs/worktree/worktree.js';
import { Redactor } from '../../src/lib/redact.js';

let root: string;
let project: string;
let stateDir: string;
/** Where each planted program leaves a file named after itself when it runs: must stay empty. */
let markers: string;
/** The planted programs (a folder without spaces: config values are run by a shell). */
let bin: string;
let table: JobTable;
/** What the agent does in its folder besides `write FILE TEXT` lines: set by a test. */
let agentActs: ((job: Readonly<JobRecord>, cwd: string) => void) | undefined;

const agent: Executor = async (job) => {
  for (const line of job.prompt.split('\n')) {
    const [verb, file, ...text] = line.split(' ');
    if (verb === 'write') {
      mkdirSync(join(job.cwd, file!, '..'), { recursive: true });
      writeFileSync(join(job.cwd, file!), `${text.join(' ')}\n`);
    }
  }
  agentActs?.(job, job.cwd);
  return { state: 'succeeded', outcome: { ok: true, text: 'done', costSource: 'unknown' } };
};

const ctx = () => ({
  config: { projectDir: project, stateDir, iacFile: join(project, 'IAC.md') },
  secrets: new Redactor(),
});
const integrating = (id: string, how: IntegrateMode) => integrate({ ...ctx(), jobs: table }, id, how);

async function run(...prompts: string[]): Promise<JobRecord[]> {
  const jobs = prompts.map((p) => table.submit(isolatedRequest(project, p)));
  const { pending } = await table.waitFor(
    jobs.map((j) => j.id),
    { timeoutMs: 60_000, mode: 'all' },
  );
  expect(pending).toEqual([]);
  return jobs.map((j) => table.get(j.id)!);
}

/** A program that records that it ran, then does `then` (a filter passes its input through). */
function planted(name: string, then = 'exit 0'): string {
  const file = join(bin, name);
  writeFileSync(file, `#!/bin/sh\ntouch "${join(markers, name)}"\n${then}\n`, { mode: 0o755 });
  return file;
}

const ran = () => readdirSync(markers).sort();

/**
 * The config an agent with the project as its folder writes: every key that makes git run a
 * program in the commands polyspawn runs, a driver for each kind, one more through an include.
 */
function hostileConfig(): string {
  const included = join(bin, 'included.config');
  writeFileSync(
    included,
    `[filter "inc"]\n\tclean = ${planted('include-clean', 'cat')}\n\tsmudge = ${planted('include-smudge', 'cat')}\n`,
  );
  return [
    '[core]',
    `\tfsmonitor = ${planted('fsmonitor')}`,
    `\tsshCommand = ${planted('ssh', 'exit 1')}`,
    `\tpager = ${planted('pager')}`,
    `\teditor = ${planted('editor')}`,
    `\thooksPath = ${bin}`,
    '[include]',
    `\tpath = ${included}`,
    '[filter "evil"]',
    `\tclean = ${planted('filter-clean', 'cat')}`,
    `\tsmudge = ${planted('filter-smudge', 'cat')}`,
    '\trequired = true',
    // A name with `=` and a dot: `-c filter.a=b.c.clean=` would be cut at its `=`.
    '[filter "a=b.c"]',
    `\tclean = ${planted('filter-odd-name', 'cat')}`,
    '[filter "proc"]',
    `\tprocess = ${planted('filter-process')}`,
    '[diff]',
    `\texternal = ${planted('diff-external')}`,
    '[diff "evil"]',
    `\ttextconv = ${planted('diff-textconv', 'cat "$1"')}`,
    `\tcommand = ${planted('diff-command')}`,
    '[merge "evil"]',
    `\tdriver = ${planted('merge-driver')} %O %A %B`,
    '[merge]',
    '\tdefault = evil',
    '[gpg]',
    `\tprogram = ${planted('gpg', 'exit 1')}`,
    '[commit]',
    '\tgpgSign = true',
    '[log]',
    '\tshowSignature = true',
    '[status]',
    '\tsubmoduleSummary = true',
    '',
  ].join('\n');
}
const ATTRIBUTES = '*.txt filter=evil diff=evil merge=evil\n*.md filter=proc\n*.inc filter=inc\n*.eq filter=a=b.c\n';

/** A hook of every name git may run, planted in `dir`. */
function plantHooks(dir: string): void {
  for (const hook of [
    'post-checkout',
    'pre-commit',
    'post-commit',
    'reference-transaction',
    'post-merge',
    'post-index-change',
  ])
    writeFileSync(join(dir, hook), `#!/bin/sh\ntouch "${join(markers, `hook-${hook}`)}"\n`, { mode: 0o755 });
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'polyspawn hostile '));
  bin = mkdtempSync(join(tmpdir(), 'polyspawn-planted-'));
  markers = join(bin, 'ran');
  mkdirSync(markers);
  project = join(root, 'my project');
  mkdirSync(project);
  stateDir = join(project, '.polyspawn');
  sh(project, 'init', '-q', '-b', 'main');
  writeFileSync(join(project, 'app.txt'), 'one\n');
  writeFileSync(join(project, 'notes.md'), 'notes\n');
  writeFileSync(join(project, 'data.inc'), 'data\n');
  sh(project, 'add', '.');
  sh(project, 'commit', '-q', '-m', 'first');
  agentActs = undefined;
  table = new JobTable({ concurrency: 6, execute: withWorktree(agent, ctx()) });
});
afterEach(async () => {
  await table.shutdown();
  rmSync(root, { recursive: true, force: true });
  rmSync(bin, { recursive: true, force: true });
});

describe('no program an agent named runs', () => {
  test('an agent-written .git/config and .gitattributes: worktree open, the commit at the end, patch, merge, a conflicting merge, cherry-pick, discard', async () => {
    // What an agent that had the project as its folder left: the config, attributes, hooks.
    appendFileSync(join(project, '.git', 'config'), hostileConfig());
    writeFileSync(join(project, '.git', 'info', 'attributes'), ATTRIBUTES);
    plantHooks(join(project, '.git', 'hooks'));
    plantHooks(bin);
    // The agents write files of each driver's kind, and a .gitattributes of their own.
    const [a, b, c, d, e] = await run(
      'write new.txt a\nwrite more.md a\nwrite x.inc a\nwrite y.eq a\nwrite .gitattributes * filter=evil',
      'write app.txt from b',
      'write other.txt c\nwrite notes.md c',
      'write app.txt from d',
      'write gone.txt e',
    );
    expect(ran()).toEqual([]);
    for (const job of [a, b, c, d, e]) expect(job!.worktree!.changes!.removed).toBe(false);
    expect(a!.worktree!.changes!.files).toEqual(['.gitattributes', 'more.md', 'new.txt', 'x.inc', 'y.eq']);
    const patch = await integrating(a!.id, 'patch');
    expect(ran()).toEqual([]);
    expect(patch.patch).toContain('+a');
    expect((await integrating(a!.id, 'merge')).removed).toBe(true);
    expect(ran()).toEqual([]);
    expect(readFileSync(join(project, 'new.txt'), 'utf8')).toBe('a\n');
    expect((await integrating(b!.id, 'merge')).removed).toBe(true);
    // d changes app.txt too: a three-way merge, where merge=evil would run its driver.
    await expect(integrating(d!.id, 'merge')).rejects.toThrow(
      /conflicts with your branch in app\.txt: nothing was changed/,
    );
    await expect(integrating(d!.id, 'cherry-pick')).rejects.toThrow(/conflicts with your branch in app\.txt/);
    expect((await integrating(c!.id, 'cherry-pick')).commits).toHaveLength(1);
    expect((await integrating(e!.id, 'discard')).removed).toBe(true);
    expect(ran()).toEqual([]);
  });

  test('the same written while the agents ran: each integrate mode runs none of it', async () => {
    const [a, b, c, d, e] = await run(
      'write new.txt a\nwrite more.md a\nwrite x.inc a\nwrite y.eq a',
      'write app.txt from b',
      'write other.txt c\nwrite notes.md c',
      'write app.txt from d',
      'write gone.txt e',
    );
    appendFileSync(join(project, '.git', 'config'), hostileConfig());
    writeFileSync(join(project, '.git', 'info', 'attributes'), ATTRIBUTES);
    plantHooks(join(project, '.git', 'hooks'));
    plantHooks(bin);
    // Each step's answer is looked at once nothing has run (an error is an answer too).
    const step = async (what: string, done: Promise<Integration>) => {
      const answer = await done.catch((error: Error) => error);
      expect(ran(), `after ${what}`).toEqual([]);
      return answer;
    };
    expect(await step('patch', integrating(a!.id, 'patch'))).toMatchObject({ patch: expect.stringContaining('+a') });
    expect(await step('merge', integrating(a!.id, 'merge'))).toMatchObject({ removed: true });
    expect(await step('merge', integrating(b!.id, 'merge'))).toMatchObject({ removed: true });
    // d changes app.txt too: a three-way merge, where merge=evil would run its driver.
    expect(await step('a three-way merge', integrating(d!.id, 'merge'))).toMatchObject({
      message: expect.stringMatching(/conflicts with your branch in app\.txt/),
    });
    expect(await step('cherry-pick', integrating(c!.id, 'cherry-pick'))).toMatchObject({ removed: true });
    expect(await step('discard', integrating(e!.id, 'discard'))).toMatchObject({ removed: true });
    expect(readFileSync(join(project, 'notes.md'), 'utf8')).toBe('c\n');
  });

  test.each(['a file naming', 'a link to'])(
    "a worktree's .git made %s a git folder the agent built is not followed",
    async (how) => {
      agentActs = (job, cwd) => {
        // A git folder of its own, sharing the repository's objects, at the commit it started from.
        const head = readFileSync(join(cwd, '.git'), 'utf8')
          .trim()
          .replace(/^gitdir: /, '');
        const start = readFileSync(join(head, 'HEAD'), 'utf8').trim();
        const commit = start.startsWith('ref:') ? sh(project, 'rev-parse', start.slice(5)).trim() : start;
        const evil = join(cwd, '.evil');
        execFileSync('git', ['init', '-q', '--bare', evil]);
        writeFileSync(join(evil, 'objects', 'info', 'alternates'), `${join(project, '.git', 'objects')}\n`);
        writeFileSync(join(evil, 'HEAD'), `${commit}\n`);
        appendFileSync(join(evil, 'config'), `[core]\n\tbare = false\n${hostileConfig().replace('[core]\n', '')}`);
        writeFileSync(join(evil, 'info', 'attributes'), ATTRIBUTES);
        plantHooks(join(evil, 'hooks'));
        rmSync(join(cwd, '.git'));
        if (how === 'a link to') symlinkSync(evil, join(cwd, '.git'));
        else writeFileSync(join(cwd, '.git'), `gitdir: ${evil}\n`);
      };
      const [job] = await run('write new.txt x\nwrite more.md y');
      expect(ran()).toEqual([]);
      expect(job!.worktree!.changes!.files).toContain('new.txt');
      agentActs = undefined;
      expect((await integrating(job!.id, 'patch')).patch).toContain('+x');
      expect((await integrating(job!.id, 'merge')).removed).toBe(true);
      expect(readFileSync(join(project, 'new.txt'), 'utf8')).toBe('x\n');
      expect(existsSync(job!.worktree!.path)).toBe(false);
      expect(ran()).toEqual([]);
    },
  );

  test("a worktree's admin folder repointed (commondir) at a common folder the agent built is not followed", async () => {
    agentActs = (job, cwd) => {
      const admin = readFileSync(join(cwd, '.git'), 'utf8')
        .trim()
        .replace(/^gitdir: /, '');
      const evil = join(cwd, '.evil');
      execFileSync('git', ['init', '-q', '--bare', evil]);
      writeFileSync(join(evil, 'objects', 'info', 'alternates'), `${join(project, '.git', 'objects')}\n`);
      const branch = join(evil, 'refs', 'heads', 'polyspawn');
      mkdirSync(branch, { recursive: true });
      writeFileSync(join(branch, job.id), `${sh(project, 'rev-parse', `polyspawn/${job.id}`).trim()}\n`);
      appendFileSync(join(evil, 'config'), `[core]\n\tbare = false\n${hostileConfig().replace('[core]\n', '')}`);
      writeFileSync(join(evil, 'info', 'attributes'), ATTRIBUTES);
      writeFileSync(join(admin, 'commondir'), `${evil}\n`);
    };
    const [job] = await run('write new.txt x');
    expect(ran()).toEqual([]);
    expect(job!.worktree!.changes!.files).toContain('new.txt');
    expect((await integrating(job!.id, 'discard')).removed).toBe(true);
    expect(ran()).toEqual([]);
  });

  test("a worktree's own config (extensions.worktreeConfig) written by the agent runs nothing", async () => {
    sh(project, 'config', 'extensions.worktreeConfig', 'true');
    agentActs = (_job, cwd) => {
      const admin = readFileSync(join(cwd, '.git'), 'utf8')
        .trim()
        .replace(/^gitdir: /, '');
      writeFileSync(join(admin, 'config.worktree'), hostileConfig());
      writeFileSync(join(cwd, '.gitattributes'), ATTRIBUTES);
    };
    const [job] = await run('write new.txt x\nwrite more.md y\nwrite z.inc z');
    expect(ran()).toEqual([]);
    expect(job!.worktree!.changes!.files).toEqual(['.gitattributes', 'more.md', 'new.txt', 'z.inc']);
    expect((await integrating(job!.id, 'merge')).removed).toBe(true);
    expect(ran()).toEqual([]);
  });

  test("a worktree's HEAD moved onto the user's branch: polyspawn commits nothing there", async () => {
    const main = sh(project, 'rev-parse', 'main');
    agentActs = (_job, cwd) => {
      const admin = readFileSync(join(cwd, '.git'), 'utf8')
        .trim()
        .replace(/^gitdir: /, '');
      writeFileSync(join(admin, 'HEAD'), 'ref: refs/heads/main\n');
    };
    const [job] = await run('write new.txt x');
    expect(sh(project, 'rev-parse', 'main')).toBe(main);
    expect(job!.worktree!.notes!.join()).toMatch(
      /could not be committed or read \(the worktree's HEAD is on refs\/heads\/main, not on polyspawn\/\w+: nothing was committed/,
    );
    await expect(integrating(job!.id, 'merge')).rejects.toThrow(/HEAD is on refs\/heads\/main, not on polyspawn/);
    expect(sh(project, 'rev-parse', 'main')).toBe(main);
    expect(existsSync(join(project, 'new.txt'))).toBe(false);
  });

  test('core.worktree and core.bare an agent set do not move where polyspawn writes', async () => {
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(elsewhere);
    const [job] = await run('write new.txt x');
    // Written after the repository was resolved: the work tree stays pinned.
    sh(project, 'config', 'core.worktree', elsewhere);
    sh(project, 'config', 'core.bare', 'true');
    expect((await integrating(job!.id, 'merge')).removed).toBe(true);
    expect(readFileSync(join(project, 'new.txt'), 'utf8')).toBe('x\n');
    expect(readdirSync(elsewhere)).toEqual([]);
    // Written before it was resolved (a new project folder): refused, said.
    const other = join(root, 'other');
    mkdirSync(other);
    sh(other, 'init', '-q', '-b', 'main');
    sh(other, 'commit', '-q', '--allow-empty', '-m', 'first');
    sh(other, 'config', 'core.worktree', elsewhere);
    await expect(repositoryOf(other)).rejects.toThrow(/is outside the work tree .* that its repository names/);
  });

  test("a filter of the user's own config still applies (git-lfs); the same in the repository's config does not", async () => {
    const global = join(bin, 'user.gitconfig');
    writeFileSync(global, '[filter "upper"]\n\tclean = tr a-z A-Z\n');
    sh(project, 'config', 'filter.lower.clean', 'tr A-Z a-z');
    writeFileSync(join(project, '.git', 'info', 'attributes'), '*.up filter=upper\n*.low filter=lower\n');
    const before = process.env.GIT_CONFIG_GLOBAL;
    process.env.GIT_CONFIG_GLOBAL = global;
    try {
      const [job] = await run('write x.up shout\nwrite y.low QUIET');
      expect(sh(project, 'show', `polyspawn/${job!.id}:x.up`)).toBe('SHOUT\n');
      expect(sh(project, 'show', `polyspawn/${job!.id}:y.low`)).toBe('QUIET\n');
    } finally {
      if (before === undefined) delete process.env.GIT_CONFIG_GLOBAL;
      else process.env.GIT_CONFIG_GLOBAL = before;
    }
  });

  test('a promisor remote with an ssh command is never fetched from (a lazy fetch of a missing object)', async () => {
    // A partial clone whose remote is reached by a planted ssh: the blob of app.txt is missing.
    const blob = sh(project, 'rev-parse', 'HEAD:app.txt').trim();
    sh(project, 'config', 'core.repositoryformatversion', '1');
    sh(project, 'config', 'extensions.partialClone', 'origin');
    sh(project, 'config', 'remote.origin.url', 'ssh://example.invalid/repo.git');
    sh(project, 'config', 'remote.origin.promisor', 'true');
    sh(project, 'config', 'core.sshCommand', planted('ssh', 'exit 1'));
    rmSync(join(project, '.git', 'objects', blob.slice(0, 2), blob.slice(2)));
    const [job] = await run('write new.txt x');
    expect(ran()).toEqual([]);
    expect(job!.state).toBe('failed');
    // git says "transport not allowed", or (a git with GIT_NO_LAZY_FETCH) "lazy fetching disabled".
    expect(job!.outcome!.error).toMatch(
      /^isolation "worktree": git worktree failed: .*(not allowed|lazy fetching disabled)/,
    );
    expect(ran()).toEqual([]);
  });
});

describe('integrate keeps the checkout whole', () => {
  test('a branch that writes a file the checkout has but git ignores is refused, in every shape; nothing is overwritten', async () => {
    writeFileSync(join(project, '.gitignore'), 'local.env\nbuild/\ncache\n');
    sh(project, 'add', '.gitignore');
    sh(project, 'commit', '-q', '-m', 'ignores');
    writeFileSync(join(project, 'local.env'), 'SECRET=mine\n');
    mkdirSync(join(project, 'build'));
    writeFileSync(join(project, 'build', 'out.bin'), 'built\n');
    writeFileSync(join(project, 'cache'), 'a file\n');
    agentActs = (_job, cwd) => writeFileSync(join(cwd, '.gitignore'), 'nothing\n');
    const [env, out, intoFile, beside] = await run(
      'write local.env AGENT',
      'write build/out.bin agent',
      'write cache/entry agent',
      'write build/new.bin agent',
    );
    for (const how of ['merge', 'cherry-pick'] as const) {
      await expect(integrating(env!.id, how)).rejects.toThrow(
        /writes local\.env, which your checkout has but git does not track \(an ignored or untracked file\): integrating would overwrite it/,
      );
      await expect(integrating(out!.id, how)).rejects.toThrow(/writes build\/out\.bin, which your checkout has/);
      await expect(integrating(intoFile!.id, how)).rejects.toThrow(/writes cache\/entry, which your checkout has/);
    }
    expect(readFileSync(join(project, 'local.env'), 'utf8')).toBe('SECRET=mine\n');
    expect(readFileSync(join(project, 'build', 'out.bin'), 'utf8')).toBe('built\n');
    expect(readFileSync(join(project, 'cache'), 'utf8')).toBe('a file\n');
    // A new file beside ignored ones (only .gitignore is tracked and changed) overwrites nothing.
    expect((await integrating(beside!.id, 'merge')).removed).toBe(true);
    expect(readFileSync(join(project, 'build', 'new.bin'), 'utf8')).toBe('agent\n');
    expect(readFileSync(join(project, 'build', 'out.bin'), 'utf8')).toBe('built\n');
    // A tracked file whose changes the index hides (assume-unchanged) is not written over either.
    const [hidden] = await run('write app.txt agent');
    sh(project, 'update-index', '--assume-unchanged', 'app.txt');
    writeFileSync(join(project, 'app.txt'), 'mine, hidden\n');
    await expect(integrating(hidden!.id, 'merge')).rejects.toThrow(
      /writes app\.txt, which your index marks assume-unchanged or skip-worktree/,
    );
    expect(readFileSync(join(project, 'app.txt'), 'utf8')).toBe('mine, hidden\n');
    // Its branch is still there for the refused ones.
    expect(sh(project, 'branch', '--list', `polyspawn/${env!.id}`)).not.toBe('');
  });

  test("merge and cherry-pick refuse a detached HEAD and the agent's own branch, and keep the branch", async () => {
    const [job] = await run('write new.txt x');
    sh(project, 'checkout', '-q', '--detach', 'HEAD');
    const head = sh(project, 'rev-parse', 'HEAD');
    for (const how of ['merge', 'cherry-pick'] as const)
      await expect(integrating(job!.id, how)).rejects.toThrow(
        /your checkout is on a detached HEAD \(\w+\), so the commits would be on no branch: check out the branch/,
      );
    expect(sh(project, 'rev-parse', 'HEAD')).toBe(head);
    expect(sh(project, 'branch', '--list', `polyspawn/${job!.id}`)).not.toBe('');
    // Nor onto the agent's own branch, which integrating removes.
    sh(project, 'worktree', 'remove', '--force', job!.worktree!.path);
    sh(project, 'checkout', '-q', `polyspawn/${job!.id}`);
    await expect(integrating(job!.id, 'merge')).rejects.toThrow(
      /your checkout is on polyspawn\/\w+, the agent's own branch/,
    );
    sh(project, 'checkout', '-q', 'main');
    expect((await integrating(job!.id, 'merge')).removed).toBe(true);
    expect(readFileSync(join(project, 'new.txt'), 'utf8')).toBe('x\n');
  });

  test('a merge the user left under way is not aborted by polyspawn: integrate refuses', async () => {
    const [job] = await run('write new.txt x');
    sh(project, 'checkout', '-q', '-b', 'side');
    writeFileSync(join(project, 'app.txt'), 'side\n');
    sh(project, 'commit', '-q', '-am', 'side');
    sh(project, 'checkout', '-q', 'main');
    writeFileSync(join(project, 'app.txt'), 'main\n');
    sh(project, 'commit', '-q', '-am', 'main');
    expect(() => sh(project, 'merge', 'side')).toThrow();
    await expect(integrating(job!.id, 'merge')).rejects.toThrow(
      /a git operation is under way in your checkout \(MERGE_HEAD/,
    );
    expect(existsSync(join(project, '.git', 'MERGE_HEAD'))).toBe(true);
  });

  test('six merges at once: each answers, all land, the checkout is clean', async () => {
    const jobs = await run(...[1, 2, 3, 4, 5, 6].map((n) => `write file${n}.txt ${n}`));
    const done = await Promise.all(jobs.map((j) => integrating(j.id, 'merge')));
    expect(done.map((d) => d.removed)).toEqual([true, true, true, true, true, true]);
    for (const n of [1, 2, 3, 4, 5, 6]) expect(readFileSync(join(project, `file${n}.txt`), 'utf8')).toBe(`${n}\n`);
    expect(existsSync(join(project, '.git', 'MERGE_HEAD'))).toBe(false);
    expect(sh(project, 'status', '--porcelain', '--untracked-files=no')).toBe('');
    expect(sh(project, 'log', '--merges', '--format=%s').split('\n').filter(Boolean)).toHaveLength(6);
    for (const j of jobs) expect(existsSync(worktreePlace(stateDir, j.id).path)).toBe(false);
  });
});
