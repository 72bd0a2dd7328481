// The real claude, codex and Gemini CLIs with isolation "worktree": each runs a shell command (the fake
// model API's [[fake:tool:...]]) that writes a file where it works, which is its own git worktree;
// the change is reported, committed on its branch, and the user's checkout never sees it.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initRepo, userGit as git } from '../helpers/git.js';
import type { TestServer } from '../helpers/mcp.js';
import { startContractRig, type ContractRig } from './clis.js';

type Job = {
  agent_id: string;
  state: string;
  text?: string;
  worktree?: { path: string; branch: string; kept: boolean; files?: string[]; uncommitted?: string[] };
};

let rig: ContractRig;
let server: TestServer;

beforeAll(async () => {
  rig = await startContractRig();
  server = rig.server;
  initRepo(server.projectDir);
}, 900_000);

afterAll(() => rig?.close());

describe.each(['claude', 'codex', 'gemini_cli'])('%s, the real CLI, in a worktree', (backend) => {
  test('its shell command writes in its worktree; the change is reported and committed on its branch', async () => {
    const file = `written-by-${backend}.txt`;
    const spawned = await server.callOk<Job>(`spawn_${backend}`, {
      prompt: `[[fake:tool:echo from ${backend} > ${file} && echo wrote]]`,
      isolation: 'worktree',
    });
    const { finished } = await server.callOk<{ finished: Job[] }>('wait_for_agents', {
      agent_ids: [spawned.agent_id],
      timeout_s: 150,
    });
    const job = finished[0]!;
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    expect(job.text).toMatch(/TOOL_RESULT: .*wrote/s);
    expect(job.worktree).toMatchObject({
      path: join(server.projectDir, '.polyspawn', 'worktrees', job.agent_id),
      branch: `polyspawn/${job.agent_id}`,
      kept: true,
      files: [file],
      uncommitted: [file],
    });
    expect(git(server.projectDir, 'show', `polyspawn/${job.agent_id}:${file}`)).toBe(`from ${backend}\n`);
    expect(existsSync(join(server.projectDir, file))).toBe(false);
  });
});
