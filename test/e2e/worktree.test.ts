// isolation: "worktree" through the built server with the fake CLIs, in a git repository on a path
// with spaces: three agents write one file name at once; result, list and IAC.md report their
// changes and the overlap; integrate merges one, refuses the conflicting second (nothing changed),
// discards the third; a resumed agent continues in its worktree; one that changes nothing leaves none.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { initRepo, userGit as git } from '../helpers/git.js';
import { fakeBinDir, serverEntry, startServer, type TestServer } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';

vi.setConfig({ testTimeout: 120_000 });

type Worktree = {
  path: string;
  branch: string;
  base: string;
  kept: boolean;
  files?: string[];
  uncommitted?: string[];
  agent_committed?: boolean;
  diff_stat?: string;
  overlaps?: { file: string; agent_ids: string[] }[];
};
type Job = { agent_id: string; state: string; error?: string; changed_files?: number; worktree?: Worktree };

let root: string;
let project: string;
let s: TestServer;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'polyspawn worktree e2e '));
  project = join(root, 'the project');
  mkdirSync(project);
  initRepo(project);
  s = await startServer({ projectDir: project });
});
afterAll(async () => {
  await s?.close();
  rmSync(root, { recursive: true, force: true });
});

async function waitAll(ids: string[]): Promise<Job[]> {
  const done: Job[] = [];
  for (let pending = ids; pending.length;) {
    const waited = await s.callOk<{ finished: Job[]; pending: Job[] }>('wait_for_agents', {
      agent_ids: pending,
      timeout_s: 60,
    });
    done.push(...waited.finished);
    pending = waited.pending.map((j) => j.agent_id);
  }
  return ids.map((id) => done.find((j) => j.agent_id === id)!);
}

describe('agents in worktrees, through the server', () => {
  test('three at once on one file name; then merge, a conflict, discard', async () => {
    const spawned = await Promise.all(
      (['claude', 'codex', 'copilot'] as const).map((backend) =>
        s.callOk<Job>(`spawn_${backend}`, {
          prompt: `Write the notes [[cli:write:notes.txt=from ${backend}]]`,
          isolation: 'worktree',
        }),
      ),
    );
    const ids = spawned.map((j) => j.agent_id);
    const jobs = await waitAll(ids);
    expect(jobs.map((j) => j.state)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    for (const [i, job] of jobs.entries()) {
      expect(job.worktree).toMatchObject({
        branch: `polyspawn/${job.agent_id}`,
        path: join(project, '.polyspawn', 'worktrees', job.agent_id),
        kept: true,
        files: ['notes.txt'],
        uncommitted: ['notes.txt'],
        agent_committed: false,
        diff_stat: '1 file changed, 1 insertion(+)',
      });
      expect(git(project, 'show', `polyspawn/${job.agent_id}:notes.txt`)).toBe(
        `from ${['claude', 'codex', 'copilot'][i]}\n`,
      );
      // The run store (untracked here) is polyspawn's own: it makes no note of a dirty checkout.
      expect(job.worktree).not.toHaveProperty('notes');
      expect(job.worktree!.overlaps).toEqual([
        { file: 'notes.txt', agent_ids: [job.agent_id, ...ids.filter((id) => id !== job.agent_id)] },
      ]);
    }
    // The user's checkout is untouched: no notes.txt, no worktree among its untracked files.
    expect(existsSync(join(project, 'notes.txt'))).toBe(false);
    expect(git(project, 'status', '--porcelain', '--untracked-files=all')).not.toMatch(/worktrees|notes\.txt/);
    expect(git(project, 'worktree', 'list')).toContain(join(project, '.polyspawn', 'worktrees', ids[0]!));

    const listed = await s.callOk<{ agents: Job[] }>('list', {});
    for (const id of ids) expect(listed.agents.find((j) => j.agent_id === id)!.changed_files).toBe(1);

    const merged = await s.callOk<{ files: string[]; commits: string[]; removed: boolean }>('integrate', {
      agent_id: ids[0],
      how: 'merge',
    });
    expect(merged).toMatchObject({ files: ['notes.txt'], removed: true });
    expect(readFileSync(join(project, 'notes.txt'), 'utf8')).toBe('from claude\n');

    const head = git(project, 'rev-parse', 'HEAD');
    const conflict = await s.call('integrate', { agent_id: ids[1], how: 'merge' });
    expect(conflict.isError).toBe(true);
    expect(JSON.stringify(conflict.content)).toMatch(/conflicts with your branch in notes\.txt: nothing was changed/);
    expect(git(project, 'rev-parse', 'HEAD')).toBe(head);
    expect(git(project, 'status', '--porcelain', '--untracked-files=no')).toBe('');

    await s.callOk('integrate', { agent_id: ids[2], how: 'discard' });
    expect(git(project, 'branch', '--list', `polyspawn/${ids[2]}`)).toBe('');
    const after = await s.callOk<Job>('result', { agent_id: ids[2] });
    expect(after.worktree!.kept).toBe(false);

    // IAC.md is rewritten a moment after the last change (writes are coalesced): wait for it.
    const entry = `**Worktree:** branch polyspawn/${ids[1]} from`;
    const iacText = () => readFileSync(join(project, 'IAC.md'), 'utf8');
    await waitFor('IAC.md to show the worktree', () => iacText().includes(entry), 20_000);
    const iac = iacText();
    expect(iac).toContain(entry);
    expect(iac).toContain('- notes.txt (left uncommitted; committed by polyspawn)');

    // `polyspawn status` lists the worktree still kept.
    const status = execFileSync(process.execPath, [serverEntry, 'status'], { cwd: project, encoding: 'utf8' });
    expect(status).toMatch(new RegExp(`Worktrees kept \\(1\\)[\\s\\S]*${ids[1]}  succeeded, 1 files changed`));
  });

  test('a resumed agent continues in its worktree, on its branch; an agent that changes nothing leaves no worktree', async () => {
    const [first] = await waitAll([
      (await s.callOk<Job>('spawn_codex', { prompt: 'one [[cli:write:one.txt=1]]', isolation: 'worktree' })).agent_id,
    ]);
    const [second] = await waitAll([
      (await s.callOk<Job>('spawn_codex', { prompt: 'two [[cli:write:two.txt=2]]', resume: first!.agent_id })).agent_id,
    ]);
    expect(second!.worktree).toMatchObject({
      path: first!.worktree!.path,
      branch: first!.worktree!.branch,
      files: ['one.txt', 'two.txt'],
    });

    const [idle] = await waitAll([
      (await s.callOk<Job>('spawn_claude', { prompt: 'look only', isolation: 'worktree' })).agent_id,
    ]);
    expect(idle!.state).toBe('succeeded');
    expect(idle!.worktree).toMatchObject({ kept: false, files: [] });
    expect(idle!.changed_files).toBe(0);
    expect(git(project, 'branch', '--list', `polyspawn/${idle!.agent_id}`)).toBe('');
  });

  test('`polyspawn run --isolation worktree --base <ref>` from a terminal', () => {
    const first = git(project, 'rev-list', '--max-parents=0', 'HEAD').trim();
    const run = spawnSync(
      process.execPath,
      [
        serverEntry,
        'run',
        'codex',
        '--isolation',
        'worktree',
        '--base',
        first,
        '--json',
        'ran [[cli:write:ran.txt=ran]]',
      ],
      { cwd: project, env: { ...process.env, PATH: `${fakeBinDir}${delimiter}${process.env.PATH}` }, encoding: 'utf8' },
    );
    expect(run.status, run.stderr).toBe(0);
    const job = JSON.parse(run.stdout) as Job;
    expect(job.worktree).toMatchObject({ base: first, files: ['ran.txt'], kept: true });
    expect(git(project, 'show', `polyspawn/${job.agent_id}:ran.txt`)).toBe('ran\n');
  });

  test('base on a spawn: the worktree starts from that ref; base without isolation is refused', async () => {
    const first = git(project, 'rev-list', '--max-parents=0', 'HEAD').trim();
    const job = await s.callOk<Job>('spawn_claude', {
      prompt: 'from the first commit [[cli:write:based.txt=based]]',
      isolation: 'worktree',
      base: first,
      wait_s: 60,
    });
    expect(job.worktree).toMatchObject({ base: first, files: ['based.txt'] });
    const refused = await s.call('spawn_claude', { prompt: 'x', base: first });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toMatch(/base applies only with isolation/);
  });

  test('an API backend takes no isolation', async () => {
    const refused = await s.call('spawn_grok', { prompt: 'x', isolation: 'worktree' });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toMatch(/isolation/);
  });
});
