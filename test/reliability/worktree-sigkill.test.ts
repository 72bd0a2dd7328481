// An agent isolated in a worktree is writing when its server is SIGKILLed (the reaper too). The next
// server marks it interrupted and says its worktree is kept; `polyspawn status` lists the worktree
// as interrupted; integrate commits what the agent left and merges it. The user's checkout is
// never touched meanwhile.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { userGit as git } from '../helpers/git.js';
import { serverEntry } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';
import { killReaperThenServer, reaperOf, startRpcServer, stopAllAndCollectStdoutProblems } from '../helpers/rpc.js';

type Job = { agent_id: string; state: string; error?: string; worktree?: { path: string; kept: boolean } };

const root = mkdtempSync(join(tmpdir(), 'polyspawn worktree sigkill '));
afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
  rmSync(root, { recursive: true, force: true });
});

describe('SIGKILL while an isolated agent writes, then a restart', () => {
  test(
    'interrupted, its worktree kept and listed; integrate commits what it left and merges',
    { timeout: 120_000 },
    async () => {
      const project = join(root, 'a project');
      mkdirSync(project);
      git(project, 'init', '-q', '-b', 'main');
      writeFileSync(join(project, 'app.txt'), 'one\n');
      git(project, 'add', '.');
      git(project, 'commit', '-q', '-m', 'first');

      const first = await startRpcServer({ projectDir: project });
      const job = await first.callOk<Job>('spawn_codex', {
        prompt: 'half done [[cli:write:half.txt=partial]] [[cli:hang]]',
        isolation: 'worktree',
      });
      const path = join(project, '.polyspawn', 'worktrees', job.agent_id);
      await waitFor('the agent to write in its worktree', () => existsSync(join(path, 'half.txt')), 30_000);

      // The agent writes first thing, which can be before the server has started its reaper.
      await waitFor('the reaper sidecar', () => reaperOf(first.pid) !== undefined, 30_000);
      await killReaperThenServer(first);

      const second = await startRpcServer({ projectDir: project });
      let after: Job;
      for (const deadline = Date.now() + 30_000; ;) {
        after = await second.callOk<Job>('result', { agent_id: job.agent_id });
        if (after.state === 'interrupted') break;
        if (Date.now() > deadline) throw new Error(`not recovered: ${after.state}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(after!.error).toContain(`Its worktree ${path} (branch polyspawn/${job.agent_id}) is kept as it was`);
      expect(existsSync(join(path, 'half.txt'))).toBe(true);

      const status = execFileSync(process.execPath, [serverEntry, 'status'], { cwd: project, encoding: 'utf8' });
      expect(status).toMatch(new RegExp(`${job.agent_id}  interrupted .*integrate commits it first`));
      // The user's checkout saw nothing of it.
      expect(git(project, 'status', '--porcelain', '--untracked-files=all')).not.toMatch(/half\.txt|worktrees/);

      const merged = await second.callOk<{ files: string[]; removed: boolean }>('integrate', {
        agent_id: job.agent_id,
        how: 'merge',
      });
      expect(merged).toMatchObject({ files: ['half.txt'], removed: true });
      expect(readFileSync(join(project, 'half.txt'), 'utf8')).toBe('partial\n');
      expect(git(project, 'log', '-1', '--format=%s', 'HEAD^2')).toMatch(
        new RegExp(`^polyspawn ${job.agent_id} \\(codex\\): half done`),
      );
    },
  );
});
