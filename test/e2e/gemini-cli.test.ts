// gemini_cli through the built server with the fake Gemini CLI: the job table's usage and cost
// (its router's model and the turn's, each at its own price), a named agent's permission mode and
// system prompt as the CLI receives them, a resumed session, a failure, and its IAC.md entry.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { spawnAndWait as spawnAndWaitOn, type Job } from '../helpers/jobs.js';
import { recordOf, waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

vi.setConfig({ testTimeout: 120_000 });

const recordDir = tempDir('e2e-gemini-cli');

let s: TestServer;
const spawnAndWait = (tool: string, args: Record<string, unknown>): Promise<Job> => spawnAndWaitOn(s, tool, args);
beforeAll(async () => {
  s = await startServer({ env: { FAKE_CLI_RECORD: recordDir, FAKE_CLI_RECORD_ENV: 'TMPDIR,POLYSPAWN_RUN_MARK' } });
});
afterAll(async () => {
  await s?.close();
  rmSync(recordDir, { recursive: true, force: true });
});

test('a run: both models counted and priced, yolo by default, temp files in the run folder, a run mark; then resumed', async () => {
  const marker = `gemini-e2e-${Date.now()}`;
  const job = await spawnAndWait('spawn_gemini_cli', { prompt: `${marker} hello` });
  expect(job).toMatchObject({
    state: 'succeeded',
    text: expect.stringContaining(`FAKE gemini: ${marker} hello`),
    usage: { input_tokens: 24, output_tokens: 14 },
    cost_source: 'estimated',
  });
  // flash-lite (its router) and 3.8 flash (the turn), 12/7 tokens each.
  expect(job.cost_usd).toBeCloseTo((12 * 0.3 + 7 * 2.5 + 12 * 0.75 + 7 * 3.75) / 1e6, 12);
  const record = recordOf(recordDir, marker);
  expect(record.argv).toEqual(['-p', '', '-o', 'stream-json', '--skip-trust', '--approval-mode', 'yolo']);
  expect(record.env.TMPDIR).toBe(join(s.projectDir, '.polyspawn', 'runs', job.agent_id));
  expect(record.env.POLYSPAWN_RUN_MARK).toMatch(/^[0-9a-f]{32}$/);

  const again = `gemini-e2e-again-${Date.now()}`;
  const resumed = await spawnAndWait('spawn_gemini_cli', { prompt: again, resume: job.agent_id });
  expect(resumed).toMatchObject({ state: 'succeeded', session_id: job.session_id });
  expect(recordOf(recordDir, again).argv).toContain(`--resume=${job.session_id}`);
});

test('a named agent: its permission mode is its approval mode, its system prompt comes before the task', async () => {
  await s.callOk('define_agent', {
    name: 'gemini-editor',
    description: 'Edits files with Gemini CLI, no shell.',
    backend: 'gemini_cli',
    permission: 'auto_edit',
    system_prompt: 'Edit only what the task names.',
  });
  const marker = `gemini-agent-${Date.now()}`;
  const job = await spawnAndWait('spawn_gemini-editor', { prompt: `${marker} fix it` });
  expect(job.state, job.error).toBe('succeeded');
  const record = recordOf(recordDir, marker);
  expect(record.argv.slice(-2)).toEqual(['--approval-mode', 'auto_edit']);
  expect(record.prompt).toBe(
    `<polyspawn_instructions>\nEdit only what the task names.\n</polyspawn_instructions>\n\n${marker} fix it`,
  );
});

test('an API error fails the job with its message; IAC.md records it', async () => {
  const job = await spawnAndWait('spawn_gemini_cli', { prompt: 'gemini-e2e-fail [[cli:fail]]' });
  expect(job).toMatchObject({
    state: 'failed',
    error: expect.stringMatching(/^gemini reported an error: \[API Error: .*401/),
  });
  const iac = join(s.projectDir, 'IAC.md');
  await waitFor(
    'IAC.md to show the failed run',
    () => {
      try {
        return readFileSync(iac, 'utf8').includes(`### \`${job.agent_id}\``);
      } catch {
        return false;
      }
    },
    20_000,
  );
  const entry = readFileSync(iac, 'utf8').split(`### \`${job.agent_id}\``)[1]!;
  expect(entry).toContain('gemini reported an error: [API Error:');
});
