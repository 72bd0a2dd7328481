// The real Gemini CLI (headless, stream-json) as polyspawn's gemini_cli backend, through the
// built server, against the fake model API: a file written (auto_edit), refused (read-only), a
// shell command (yolo), a resumed turn, an API error, and a cancel that leaves nothing running,
// though its shell commands run in sessions of their own (setsid).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FakeModelApi } from '../fakes/model-api.js';
import type { TestServer } from '../helpers/mcp.js';
import { waitFor, waitGone } from '../helpers/processes.js';
import { startContractRig, type ContractRig } from './clis.js';
import type { Job } from '../helpers/jobs.js';

let rig: ContractRig;
let api: FakeModelApi;
let server: TestServer;

beforeAll(async () => {
  rig = await startContractRig();
  ({ api, server } = rig);
  for (const permission of ['auto_edit', 'read-only']) {
    await server.callOk('define_agent', {
      name: `gemini-${permission}`,
      description: `Gemini CLI in its ${permission} mode`,
      backend: 'gemini_cli',
      permission,
      system_prompt: `Answer briefly (agent gemini-${permission}).`,
    });
  }
}, 900_000);

afterAll(() => rig?.close());

const finish = async (tool: string, args: Record<string, unknown>): Promise<Job> => {
  const job = await server.callOk<Job>(tool, args);
  const waited = await server.callOk<{ finished: Job[] }>('wait_for_agents', {
    agent_ids: [job.agent_id],
    timeout_s: 150,
  });
  return waited.finished[0] ?? job;
};

const requestsWith = (mark: string) => api.requests.filter((r) => r.rawBody.includes(mark));

describe('gemini_cli, the real Gemini CLI', () => {
  test('first turn (its router, then the model it picked, both counted and priced), then a resumed turn', async () => {
    const mark = `first-gemini-${Date.now()}`;
    const first = await finish('spawn_gemini_cli', { prompt: `${mark} say hello` });
    expect(first, JSON.stringify(first)).toMatchObject({
      state: 'succeeded',
      text: `FAKE REPLY (turn 1): ${mark} say hello`,
    });
    expect(first.session_id).toMatch(/^[0-9a-f-]{36}$/);
    // The router's request (JSON mode, on flash-lite) and the turn's: 12/7 tokens each.
    const outcomes = requestsWith(mark).map((r) => r.outcome);
    expect(outcomes).toEqual(['json', 'reply']);
    expect(first.usage).toMatchObject({ input_tokens: 24, output_tokens: 14 });
    expect(first.cost_source).toBe('estimated');
    expect(first.cost_usd).toBeCloseTo((12 * 0.3 + 7 * 2.5 + 12 * 0.75 + 7 * 3.75) / 1e6, 12);

    const mark2 = `second-gemini-${Date.now()}`;
    const second = await finish('spawn_gemini_cli', { prompt: `${mark2} and again`, resume: first.agent_id });
    expect(second, JSON.stringify(second)).toMatchObject({
      state: 'succeeded',
      text: `FAKE REPLY (turn 2): ${mark2} and again`,
      session_id: first.session_id,
    });
    // This run's tokens: Gemini CLI reports per run, not for the session.
    expect(second.usage).toMatchObject({ input_tokens: 24, output_tokens: 14 });
  });

  test('yolo (the default) runs a shell command; auto_edit writes a file; read-only offers no write tool', async () => {
    const shell = await finish('spawn_gemini_cli', {
      prompt: `[[fake:tool:echo from-gemini > shell.txt && echo ran]]`,
    });
    expect(shell.state, JSON.stringify(shell)).toBe('succeeded');
    expect(shell.text).toMatch(/TOOL_RESULT: .*ran/s);
    expect(readFileSync(join(server.projectDir, 'shell.txt'), 'utf8')).toBe('from-gemini\n');

    const edit = await finish('spawn_gemini-auto_edit', { prompt: '[[fake:write:notes/by-gemini.txt=written]]' });
    expect(edit.state, JSON.stringify(edit)).toBe('succeeded');
    expect(readFileSync(join(server.projectDir, 'notes', 'by-gemini.txt'), 'utf8')).toBe('written');
    // The agent's system prompt reached the model, before the task.
    expect(requestsWith('Answer briefly (agent gemini-auto_edit).').length).toBeGreaterThan(0);

    const refused = await finish('spawn_gemini-read-only', { prompt: '[[fake:write:refused.txt=no]]' });
    expect(refused.state, JSON.stringify(refused)).toBe('succeeded');
    expect(refused.text).toMatch(/^FAKE WRITE ERROR: the request offers no write_file tool/);
    expect(existsSync(join(server.projectDir, 'refused.txt'))).toBe(false);
    // Its temp files went to the runs' folders, none to the project.
    expect(readdirSync(server.projectDir).filter((f) => f.startsWith('gemini-'))).toEqual([]);
  });

  test('an API error fails the job with the reason', async () => {
    const job = await finish('spawn_gemini_cli', { prompt: `error-gemini [[fake:401]]` });
    expect(job.state, JSON.stringify(job)).toBe('failed');
    expect(job.error).toMatch(/gemini reported an error: .*401/);
  });

  test('cancel ends its shell command too, though it runs in a session of its own', async () => {
    const mark = `cancel-gemini-${Date.now()}`;
    // The command writes its pid, then waits: it stands for a long build the model started.
    const pidFile = join(server.projectDir, `${mark}.pid`);
    const job = await server.callOk<Job>('spawn_gemini_cli', {
      prompt: `[[fake:tool:echo $$ > ${pidFile}; exec sleep 300]]`,
    });
    await waitFor(
      'the shell command',
      () => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '',
      120_000,
    );
    const pid = Number(readFileSync(pidFile, 'utf8'));
    // Its own session: out of the job's process group.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [, , sid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    expect(Number(sid)).toBe(pid);
    await server.callOk('cancel', { agent_id: job.agent_id });
    await waitGone(pid, 30_000);
    const { finished } = await server.callOk<{ finished: Job[] }>('wait_for_agents', {
      agent_ids: [job.agent_id],
      timeout_s: 60,
    });
    expect(finished[0]?.state).toBe('cancelled');
  });
});
