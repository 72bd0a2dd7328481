// integrate at once, through the built server and from two server processes sharing one project:
// every call answers true, every branch lands, and the repository is left clean (no MERGE_HEAD, no
// staged change): integrate runs one at a time per repository, under a lock every process takes
// (a merge waits while this test's process holds it).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { initRepo, userGit as git } from '../helpers/git.js';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { exclusively, repositoryOf } from '../../src/jobs/worktree/worktree.js';

vi.setConfig({ testTimeout: 180_000 });

type Job = { agent_id: string; state: string; worktree?: { files?: string[] } };

let root: string;
let project: string;
let servers: TestServer[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'polyspawn integrate at once '));
  project = join(root, 'the project');
  mkdirSync(project);
  initRepo(project);
  servers = [await startServer({ projectDir: project }), await startServer({ projectDir: project })];
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  rmSync(root, { recursive: true, force: true });
});

/** Spawns an isolated agent that writes `file` and waits for it. */
async function agentWriting(s: TestServer, file: string): Promise<Job> {
  const job = await s.callOk<Job>('spawn_codex', {
    prompt: `write [[cli:write:${file}=${file}]]`,
    isolation: 'worktree',
    wait_s: 60,
  });
  expect(job).toMatchObject({ state: 'succeeded', worktree: { files: [file] } });
  return job;
}

describe('integrate at once', () => {
  test('six merges at once on one server, then three and three from two servers: all answer, all land, clean', async () => {
    const [one, two] = servers as [TestServer, TestServer];
    const clean = () => {
      expect(existsSync(join(project, '.git', 'MERGE_HEAD'))).toBe(false);
      expect(existsSync(join(project, '.git', 'polyspawn.lock'))).toBe(false);
      expect(git(project, 'status', '--porcelain', '--untracked-files=no')).toBe('');
      expect(git(project, 'diff', '--cached', '--name-only')).toBe('');
    };
    const files = [1, 2, 3, 4, 5, 6].map((n) => `one-${n}.txt`);
    const jobs = await Promise.all(files.map((f) => agentWriting(one, f)));
    const merged = await Promise.all(jobs.map((j) => one.call('integrate', { agent_id: j.agent_id, how: 'merge' })));
    for (const answer of merged) expect(answer.isError, JSON.stringify(answer.content)).toBeFalsy();
    for (const f of files) expect(readFileSync(join(project, f), 'utf8')).toBe(`${f}\n`);
    clean();

    const mine = await Promise.all(
      [1, 2, 3].flatMap((n) => [agentWriting(one, `a-${n}.txt`), agentWriting(two, `b-${n}.txt`)]),
    );
    const both = await Promise.all(
      mine.map((j, i) =>
        (i % 2 === 0 ? one : two).call('integrate', { agent_id: j.agent_id, how: i < 4 ? 'merge' : 'cherry-pick' }),
      ),
    );
    for (const answer of both) expect(answer.isError, JSON.stringify(answer.content)).toBeFalsy();
    for (const n of [1, 2, 3]) {
      expect(readFileSync(join(project, `a-${n}.txt`), 'utf8')).toBe(`a-${n}.txt\n`);
      expect(readFileSync(join(project, `b-${n}.txt`), 'utf8')).toBe(`b-${n}.txt\n`);
    }
    clean();
    expect(git(project, 'branch', '--list', 'polyspawn/*')).toBe('');
  });

  test('a merge waits while another process holds the repository', async () => {
    const [one] = servers as [TestServer];
    const job = await agentWriting(one, 'waited.txt');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let answered = false;
    // This test's process holds the lock as another polyspawn would, for as long as it likes.
    const holding = exclusively(await repositoryOf(project), () => released);
    await vi.waitFor(() => expect(existsSync(join(project, '.git', 'polyspawn.lock'))).toBe(true));
    const merging = one.call('integrate', { agent_id: job.agent_id, how: 'merge' }).finally(() => (answered = true));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(answered).toBe(false);
    expect(existsSync(join(project, 'waited.txt'))).toBe(false);
    release();
    await holding;
    expect((await merging).isError).toBeFalsy();
    expect(readFileSync(join(project, 'waited.txt'), 'utf8')).toBe('waited.txt\n');
  });
});
