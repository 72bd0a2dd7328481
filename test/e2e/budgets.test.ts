// Budgets through the built server with the fake CLIs: claude is given its own flags; codex and
// copilot (and gemini_cli) are followed live and stopped, their whole process group ended, once a turn past
// max_turns begins; a cost known only at the end is reported; a named agent's budget is a ceiling.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { spawnAndWait as spawnAndWaitOn, type Job } from '../helpers/jobs.js';
import { groupMembers, recordOf, waitFor, waitGone } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

vi.setConfig({ testTimeout: 150_000 });

const recordDir = tempDir('e2e-budget');

let s: TestServer;
const spawnAndWait = (tool: string, args: Record<string, unknown>): Promise<Job> => spawnAndWaitOn(s, tool, args);
beforeAll(async () => {
  const projectDir = tempDir('project');
  const agentDir = join(projectDir, '.polyspawn', 'agents', 'capped');
  mkdirSync(agentDir, { recursive: true });
  writeFileSync(
    join(agentDir, 'agent.md'),
    '---\ndescription: A capped agent.\nbackend: codex\nmax_turns: 2\nmax_budget_usd: 1\n---\nBe brief.\n',
  );
  s = await startServer({ projectDir, env: { FAKE_CLI_RECORD: recordDir } });
});
afterAll(async () => {
  await s?.close();
  rmSync(recordDir, { recursive: true, force: true });
});

test.each(['codex', 'copilot', 'gemini_cli'])(
  '%s: polyspawn stops the run as a turn past max_turns begins; the job fails naming the budget, its group is gone',
  async (backend) => {
    const marker = `turns-${backend}-${Date.now()}`;
    // 40 turns 300 ms apart: a run nobody stopped would take 12 s and end with its answer.
    const job = await spawnAndWait(`spawn_${backend}`, {
      prompt: `${marker} [[cli:turns:40:300]]`,
      budget: { max_turns: 2 },
    });
    expect(job).toMatchObject({
      state: 'failed',
      error: expect.stringMatching(/^stopped by polyspawn: it began turn 3, past max_turns \(2\) \(log: /),
      budget: { max_turns: 2, exceeded: 'turns' },
    });
    const log = readFileSync(job.log!, 'utf8');
    expect(log).toContain('turn 2');
    expect(log).not.toContain('turn 40');
    expect(job.text).not.toContain(marker);
    const { pid } = recordOf(recordDir, marker);
    await waitGone(pid);
    expect(groupMembers(pid)).toEqual([]);
  },
);

test('a run within its budget is left alone, and its result shows the budget', async () => {
  const job = await spawnAndWait('spawn_codex', { prompt: 'within [[cli:turns:2:50]]', budget: { max_turns: 3 } });
  expect(job).toMatchObject({ state: 'succeeded', budget: { max_turns: 3 } });
  expect(job.budget!.exceeded).toBeUndefined();
});

test("codex's cost, known only at the end, past max_budget_usd: the answer is kept and the budget says exceeded; IAC.md shows it", async () => {
  // 100k tokens in and out at gpt-5.5's prices: about $1.13.
  const job = await spawnAndWait('spawn_codex', {
    prompt: 'costly [[cli:usage:100000:100000]]',
    budget: { max_budget_usd: 0.5 },
  });
  expect(job).toMatchObject({
    state: 'succeeded',
    text: expect.stringContaining('costly'),
    budget: { max_budget_usd: 0.5, exceeded: 'cost' },
  });
  expect(job.cost_usd).toBeGreaterThan(0.5);
  const iac = join(s.projectDir, 'IAC.md');
  await waitFor(
    'IAC.md to show the budget',
    () => {
      try {
        return readFileSync(iac, 'utf8').includes('**Budget:** passed max_budget_usd (0.5): seen once it had finished');
      } catch {
        return false;
      }
    },
    20_000,
  );
});

test('claude gets its own flags and stops itself: polyspawn does not follow its turns', async () => {
  const marker = `claude-flags-${Date.now()}`;
  const job = await spawnAndWait('spawn_claude', {
    prompt: `${marker} [[cli:turns:3:20]]`,
    budget: { max_turns: 1, max_budget_usd: 0.25 },
  });
  // The fake claude does not enforce the flags: the run it reports is left as it is.
  expect(job).toMatchObject({ state: 'succeeded', budget: { max_turns: 1, max_budget_usd: 0.25 } });
  const { argv } = recordOf(recordDir, marker);
  expect(argv.join(' ')).toContain('--max-turns 1 --max-budget-usd 0.25');
});

test("a named agent's budget is a ceiling: a spawn may lower it, not raise it", async () => {
  const over = await s.call('spawn_capped', { prompt: 'x', budget: { max_turns: 5 } });
  expect(over.isError).toBe(true);
  expect(JSON.stringify(over.content)).toMatch(
    /max_turns 5 is over this agent's max_turns \(2, in .*agent\.md\): pass at most 2/,
  );
  const lowered = await spawnAndWait('spawn_capped', { prompt: 'lowered', budget: { max_turns: 1 } });
  expect(lowered.budget).toEqual({ max_turns: 1, max_budget_usd: 1 });
  const inherited = await spawnAndWait('spawn_capped', { prompt: 'inherited' });
  expect(inherited.budget).toEqual({ max_turns: 2, max_budget_usd: 1 });
});

test('max_budget_usd on a model polyspawn cannot price is refused with what to change; bad values too', async () => {
  const unpriced = await s.call('spawn_copilot', { prompt: 'x', budget: { max_budget_usd: 1 } });
  expect(unpriced.isError).toBe(true);
  expect(JSON.stringify(unpriced.content)).toContain('knows no price for copilot');
  for (const budget of [{ max_turns: 0 }, { max_turns: 1.5 }, { max_budget_usd: 0 }, { turns: 3 }]) {
    const bad = await s.call('spawn_codex', { prompt: 'x', budget });
    expect(bad.isError, JSON.stringify(budget)).toBe(true);
  }
});
