// The branch a container on an engine that shares no files sends back (src/jobs/worktree/engine-branch.ts),
// as hostile input, with real git: only its one branch is taken, and only when it descends from the
// job's base; anything else is refused, saying why, with the worktree and the user's refs as they
// were, not one of its objects in the user's repository (they are checked in a quarantine) and the
// bundle kept. Taking it runs no hook of the user's repository and no driver its config names.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { initRepo, userGit } from '../helpers/git.js';
import {
  bundleBranchIn,
  fetchBranchBack,
  MAX_BUNDLE_BYTES,
  RESULT_BUNDLE,
  WORK_BUNDLE,
} from '../../src/jobs/worktree/engine-branch.js';
import type { GitPlace } from '../../src/jobs/worktree/git.js';
import { repositoryOf, worktreeGit } from '../../src/jobs/worktree/worktree.js';

const BRANCH = 'polyspawn/abc123';
let root: string;
let project: string;
let runDir: string;
let worktree: string;
let repo: GitPlace;
let base: string;
/** The container's side: a clone of the bundle that went in, where the agent commits. */
let agent: string;

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'polyspawn-engine-branch-'));
  project = join(root, 'project');
  runDir = join(root, 'run');
  worktree = join(root, 'worktree');
  mkdirSync(project);
  initRepo(project);
  base = userGit(project, 'rev-parse', 'HEAD').trim();
  userGit(project, 'worktree', 'add', '-q', '-b', BRANCH, worktree, base);
  repo = await repositoryOf(project);
  await bundleBranchIn(repo, BRANCH, runDir);
  agent = join(root, 'agent');
  userGit(root, 'clone', '-q', '-b', BRANCH, join(runDir, WORK_BUNDLE), agent);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const commit = (file: string, text: string) => {
  writeFileSync(join(agent, file), text);
  userGit(agent, 'add', '-A');
  userGit(agent, 'commit', '-q', '-m', `adds ${file}`);
};
const sendBack = (...revs: string[]) => userGit(agent, 'bundle', 'create', '-q', join(runDir, RESULT_BUNDLE), ...revs);
/**
 * A bundle as an agent could write it by hand: its one ref, the branch, naming `oid`, these
 * objects in its pack, and these commits its prerequisites.
 */
const sendBackMade = (oid: string, objects: string[], prerequisites: string[] = []) => {
  const header = `# v2 git bundle\n${prerequisites.map((p) => `-${p}\n`).join('')}${oid} refs/heads/${BRANCH}\n\n`;
  const pack = execFileSync('git', ['pack-objects', '--stdout', '-q'], {
    cwd: agent,
    input: `${objects.join('\n')}\n`,
  });
  writeFileSync(join(runDir, RESULT_BUNDLE), Buffer.concat([Buffer.from(header), pack]));
};
const agentObject = (...args: string[]) =>
  execFileSync('git', args, { cwd: agent, encoding: 'utf8', input: '' }).trim();
const fetchBack = () => fetchBranchBack(repo, worktreeGit(repo, worktree), BRANCH, base, runDir);
/** Every file in the user's object store (loose objects, packs, and any folder left there). */
const objectStore = () =>
  readdirSync(join(project, '.git', 'objects'), { recursive: true })
    .map(String)
    .sort();
let storeBefore: string[];
beforeEach(() => {
  storeBefore = objectStore();
});
const unchanged = () => {
  expect(userGit(worktree, 'rev-parse', 'HEAD').trim()).toBe(base);
  expect(existsSync(join(runDir, RESULT_BUNDLE))).toBe(true);
  expect(objectStore()).toEqual(storeBefore);
};

describe('the branch an engine that shares no files sends back', () => {
  test('its branch is fetched onto the worktree, the bundle then removed; none sent: nothing changes', async () => {
    await fetchBack();
    expect(userGit(worktree, 'rev-parse', 'HEAD').trim()).toBe(base);
    commit('feature.txt', 'from the container\n');
    sendBack(`${base}..${BRANCH}`);
    await fetchBack();
    expect(readFileSync(join(worktree, 'feature.txt'), 'utf8')).toBe('from the container\n');
    expect(userGit(project, 'log', '--format=%s', BRANCH)).toBe('adds feature.txt\nfirst\n');
    expect(existsSync(join(runDir, RESULT_BUNDLE))).toBe(false);
    // Its objects moved in from the quarantine, which is gone.
    expect(objectStore().filter((path) => !storeBefore.includes(path))).toEqual([
      expect.stringMatching(/^pack\/pack-[0-9a-f]+\.(pack|idx)$/),
      expect.stringMatching(/^pack\/pack-[0-9a-f]+\.(pack|idx)$/),
    ]);
    expect(userGit(project, 'fsck', '--no-progress', '--connectivity-only')).toBe('');
  });

  test('a bundle with refs besides its branch is refused, and none of them lands in the repository', async () => {
    commit('feature.txt', 'x\n');
    userGit(agent, 'branch', 'main-evil');
    userGit(agent, 'tag', 'v-evil');
    sendBack(`${base}..${BRANCH}`, `${base}..main-evil`, 'v-evil');
    await expect(fetchBack()).rejects.toThrow(
      new RegExp(
        `^the branch its container sent back was not taken: it must hold refs/heads/${BRANCH} alone, and holds 3 refs`,
      ),
    );
    unchanged();
    expect(userGit(project, 'for-each-ref', '--format=%(refname)')).not.toMatch(/evil/);
  });

  test('a bundle of another branch alone, a file that is no bundle, a link: refused', async () => {
    commit('feature.txt', 'x\n');
    userGit(agent, 'branch', 'other');
    sendBack(`${base}..other`);
    await expect(fetchBack()).rejects.toThrow(/holds 1 refs \(refs\/heads\/other\)/);
    unchanged();
    writeFileSync(join(runDir, RESULT_BUNDLE), 'not a bundle\n');
    await expect(fetchBack()).rejects.toThrow(/not taken: not a git bundle/);
    rmSync(join(runDir, RESULT_BUNDLE));
    symlinkSync(join(project, '.git', 'config'), join(runDir, RESULT_BUNDLE));
    await expect(fetchBack()).rejects.toThrow(/not taken: it is not a regular file/);
    unchanged();
  });

  test('a branch of another history: refused, and not one of its objects enters the repository', async () => {
    userGit(agent, 'checkout', '-q', '--orphan', 'rewritten');
    commit('other.txt', 'unrelated history\n');
    userGit(agent, 'update-ref', `refs/heads/${BRANCH}`, 'rewritten');
    sendBack(BRANCH);
    await expect(fetchBack()).rejects.toThrow(
      new RegExp(`not taken: refs/heads/${BRANCH} does not descend from the job's base ${base.slice(0, 10)}`),
    );
    unchanged();
  });

  test('its branch naming a tag, a tree or a blob: refused, none of them in the repository', async () => {
    writeFileSync(join(agent, 'secret.txt'), 'what the agent sends\n');
    const sent = agentObject('hash-object', '-w', 'secret.txt');
    const tree = execFileSync('git', ['mktree'], {
      cwd: agent,
      encoding: 'utf8',
      input: `100644 blob ${sent}\tx\n`,
    }).trim();
    const tag = execFileSync('git', ['mktag'], {
      cwd: agent,
      encoding: 'utf8',
      input: `object ${sent}\ntype blob\ntag v-evil\ntagger A <a@example.com> 0 +0000\n\nx\n`,
    }).trim();
    for (const [oid, objects, type] of [
      [tag, [tag, sent], 'tag'],
      [tree, [tree, sent], 'tree'],
      [sent, [sent], 'blob'],
    ] as const) {
      sendBackMade(oid, [...objects]);
      await expect(fetchBack()).rejects.toThrow(
        new RegExp(`not taken: refs/heads/${BRANCH} is not a commit \\(${type}\\)`),
      );
      unchanged();
    }
  });

  test('a commit sent without its tree, or needing commits the repository lacks: refused, nothing enters', async () => {
    commit('feature.txt', 'x\n');
    const made = userGit(agent, 'rev-parse', 'HEAD').trim();
    sendBackMade(made, [made], [base]);
    await expect(fetchBack()).rejects.toThrow(/not taken: it lacks objects its branch needs \(fatal: bad tree object/);
    unchanged();
    commit('more.txt', 'y\n');
    sendBack(`${made}..${BRANCH}`);
    await expect(fetchBack()).rejects.toThrow(/not taken: it needs commits the repository does not have/);
    unchanged();
  });

  test('a bundle larger than the bound copy-out holds too: refused before git reads it', async () => {
    // Sparse: its size, no disk.
    writeFileSync(join(runDir, RESULT_BUNDLE), '');
    truncateSync(join(runDir, RESULT_BUNDLE), MAX_BUNDLE_BYTES + 1);
    await expect(fetchBack()).rejects.toThrow(/not taken: it is larger than 512 MiB/);
    unchanged();
  });

  test("taking it runs no hook of the user's repository and no filter its config names", async () => {
    const marker = join(root, 'ran');
    writeFileSync(join(project, '.git', 'hooks', 'post-merge'), `#!/bin/sh\ntouch ${marker}-hook\n`, { mode: 0o755 });
    userGit(project, 'config', 'filter.evil.smudge', `touch ${marker}-filter; cat`);
    commit('.gitattributes', '* filter=evil\n');
    commit('feature.txt', 'x\n');
    sendBack(`${base}..${BRANCH}`);
    await fetchBack();
    expect(readFileSync(join(worktree, 'feature.txt'), 'utf8')).toBe('x\n');
    expect(existsSync(`${marker}-hook`)).toBe(false);
    expect(existsSync(`${marker}-filter`)).toBe(false);
  });
});
