// The built server, driven by the SDK's own Client over stdio, with the fake CLIs on PATH.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { waitFor, waitGone, type FakeCliRecord } from '../helpers/processes.js';

type Job = {
  agent_id: string;
  state: string;
  backend: string;
  model: string;
  text?: string;
  error?: string;
  session_id?: string;
  log?: string;
  output_tail?: string;
  usage?: unknown;
  cost_usd?: number;
  cost_source?: string;
  exit_code?: number | null;
  elapsed_s: number;
};
type Waited = { finished: Job[]; pending: Job[]; timed_out: boolean };

const recordDir = mkdtempSync(join(tmpdir(), 'polyspawn-e2e-records-'));
/** The fake CLI's record of the run whose prompt contains `marker`. */
const recordOf = (marker: string): FakeCliRecord & { pid: number } => {
  for (const file of readdirSync(recordDir).filter((f) => f.endsWith('.json'))) {
    const record = JSON.parse(readFileSync(join(recordDir, file), 'utf8')) as FakeCliRecord;
    if (record.prompt.includes(marker)) return { ...record, pid: Number(file.replace('.json', '')) };
  }
  throw new Error(`no fake CLI run saw ${marker}`);
};

let s: TestServer;
beforeAll(async () => {
  s = await startServer({ env: { FAKE_CLI_RECORD: recordDir, CLAUDECODE: '1', POLYSPAWN_CONCURRENCY: '3' } });
});
afterAll(async () => {
  await s?.close();
});

const spawn = (backend: string, args: Record<string, unknown>) => s.callOk<Job>(`spawn_${backend}`, args);
const waitAll = (ids: string[], timeout_s = 30) => s.callOk<Waited>('wait_for_agents', { agent_ids: ids, timeout_s });
const errorText = async (name: string, args: unknown) => {
  const result = await s.client.callTool({ name, arguments: args as Record<string, unknown> });
  expect(result.isError, `${name} ${JSON.stringify(args).slice(0, 100)} should fail`).toBe(true);
  return (result.content as { text: string }[])[0]!.text;
};

describe('the tool list', () => {
  test('every tool has a description, an input schema and annotations (titles and output schemas: in the full list)', async () => {
    const { tools } = await s.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(
      expect.arrayContaining([
        'spawn_claude',
        'spawn_codex',
        'spawn_copilot',
        'spawn_grok',
        'spawn_gemini',
        'spawn_mistral',
        'list',
        'result',
        'wait_for_agents',
        'cancel',
      ]),
    );
    for (const tool of tools) {
      expect(tool.description!.length, tool.name).toBeGreaterThan(40);
      expect(tool.inputSchema.type).toBe('object');
      // Not listed (src/mcp/tool-list.ts): the results still carry structuredContent (every callOk below reads it).
      expect(tool.title, tool.name).toBeUndefined();
      expect(tool.outputSchema, tool.name).toBeUndefined();
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    // Annotations list only the hints that differ from the spec's defaults (src/mcp/tool-list.ts).
    const hints = (name: string) => ({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
      ...byName[name]!.annotations,
    });
    expect(hints('spawn_claude')).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(hints('spawn_grok')).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    expect(hints('list')).toMatchObject({ readOnlyHint: true, openWorldHint: false });
    expect(hints('cancel')).toMatchObject({ readOnlyHint: false, idempotentHint: true, openWorldHint: false });
    expect(Object.keys(byName.spawn_claude!.inputSchema.properties!)).toEqual(
      expect.arrayContaining(['prompt', 'model', 'cwd', 'system_prompt', 'resume', 'timeout_s', 'wait_s']),
    );
    expect(Object.keys(byName.spawn_grok!.inputSchema.properties!)).not.toContain('cwd');
    expect(byName.spawn_claude!.inputSchema.required).toEqual(['prompt']);
  });

  test('the instructions name every backend and whether it is usable', () => {
    const text = s.client.getInstructions()!;
    for (const name of ['claude', 'codex', 'copilot']) expect(text).toContain(`spawn_${name}: usable`);
    // No API keys in this test's environment.
    expect(text).toMatch(/spawn_grok: NOT usable here \(.*XAI_API_KEY/);
  });
});

describe('running agents', () => {
  test('each CLI backend: spawn returns at once, wait_for_agents returns the answer', async () => {
    const started = await Promise.all(
      ['claude', 'codex', 'copilot'].map((b) => spawn(b, { prompt: `hello ${b} [[cli:sleep:300]]` })),
    );
    for (const job of started) {
      expect(job.agent_id).toMatch(/^[a-z2-9]{6}$/);
      expect(['queued', 'running']).toContain(job.state);
    }
    const waited = await waitAll(started.map((j) => j.agent_id));
    expect(waited.pending).toEqual([]);
    expect(waited.timed_out).toBe(false);
    for (const job of waited.finished) {
      expect(job).toMatchObject({
        state: 'succeeded',
        text: `FAKE ${job.backend}: hello ${job.backend} [[cli:sleep:300]]`,
        exit_code: 0,
      });
      expect(job.session_id).toBeTruthy();
      expect(job.usage).toEqual({ input_tokens: 12, output_tokens: 7, cached_input_tokens: 0 });
      expect(readFileSync(job.log!, 'utf8')).toContain('FAKE');
    }
    const byBackend = Object.fromEntries(waited.finished.map((j) => [j.backend, j]));
    expect(byBackend.claude).toMatchObject({ model: 'sonnet', cost_source: 'reported', cost_usd: 0.000188 });
    expect(byBackend.codex).toMatchObject({ model: 'gpt-5.5', cost_source: 'estimated' });
    expect(byBackend.codex!.cost_usd).toBeCloseTo((12 * 1.25 + 7 * 10) / 1e6);
    expect(byBackend.copilot).toMatchObject({ cost_source: 'unknown', premium_requests: 1 });
  });

  test('the prompt reaches the CLI on stdin, intact: leading dashes, non-ASCII, 1 MB', async () => {
    const marker = `m${Date.now()}`;
    const prompt = `--dangerous ${marker} Grüße 日本語 🎉 ` + 'x'.repeat(1_000_000);
    const job = await spawn('codex', { prompt, wait_s: 30 });
    expect(job.state).toBe('succeeded');
    const record = recordOf(marker);
    expect(record.prompt).toBe(prompt);
    expect(record.argv.join(' ')).not.toContain(marker);
  });

  test('model aliases, system prompt and cwd reach the CLI as flags', async () => {
    const marker = `flags${Date.now()}`;
    const cwd = mkdtempSync(join(tmpdir(), 'polyspawn-cwd-'));
    const job = await spawn('claude', { prompt: marker, model: 'opus', system_prompt: 'Be brief.', cwd, wait_s: 30 });
    expect(job).toMatchObject({ state: 'succeeded', model: 'opus' });
    const record = recordOf(marker);
    expect(record.argv).toEqual(expect.arrayContaining(['--model', 'opus', '--append-system-prompt', 'Be brief.']));
    expect(record.cwd).toBe(cwd);
    expect(record.env.CLAUDECODE).toBeNull(); // removed although the server has it
  });

  test('resume: an earlier agent_id or a raw session id continues its session', async () => {
    const first = await spawn('claude', { prompt: 'first turn', wait_s: 30 });
    const second = await spawn('claude', {
      prompt: `second turn ${first.agent_id}`,
      resume: first.agent_id,
      wait_s: 30,
    });
    expect(second.session_id).toBe(first.session_id);
    expect(recordOf(`second turn ${first.agent_id}`).argv).toEqual(
      expect.arrayContaining(['--resume', first.session_id]),
    );
    const codexFirst = await spawn('codex', { prompt: 'codex first', wait_s: 30 });
    const codexSecond = await spawn('codex', { prompt: 'codex second', resume: codexFirst.session_id, wait_s: 30 });
    expect(codexSecond.session_id).toBe(codexFirst.session_id);
    expect(recordOf('codex second').argv.slice(0, 2)).toEqual(['exec', 'resume']);
    expect(await errorText('spawn_codex', { prompt: 'x', resume: first.agent_id })).toMatch(/ran on claude, not codex/);
  });

  test('failures: a CLI error, malformed output and a time-out end as failed or timed_out with a reason', async () => {
    const failed = await spawn('codex', { prompt: '[[cli:fail]]', wait_s: 30 });
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/codex reported an error: .*\(log: .*stdout\.log\)/);
    const malformed = await spawn('claude', { prompt: '[[cli:malformed]]', wait_s: 30 });
    expect(malformed).toMatchObject({ state: 'failed', error: expect.stringMatching(/malformed or truncated/) });
    const truncated = await spawn('copilot', { prompt: '[[cli:truncated]]', wait_s: 30 });
    expect(truncated).toMatchObject({ state: 'failed', error: expect.stringMatching(/malformed or truncated/) });
    const slow = await spawn('claude', { prompt: 'slow [[cli:hang]]', timeout_s: 1, wait_s: 30 });
    expect(slow).toMatchObject({ state: 'timed_out', error: expect.stringMatching(/timed out after 1 s/) });
    await waitGone(recordOf('slow [[cli:hang]]').pid);
  });

  test('wait_s returns early when the job outlives it; result shows progress of a running job', async () => {
    const job = await spawn('codex', { prompt: 'long [[cli:sleep:3000]]', wait_s: 0.5 });
    expect(job.state).toBe('running');
    const running = await s.callOk<Job>('result', { agent_id: job.agent_id });
    expect(running.state).toBe('running');
    expect(running.elapsed_s).toBeGreaterThanOrEqual(0);
    const done = await waitAll([job.agent_id]);
    expect(done.finished[0]!.state).toBe('succeeded');
    const full = await s.callOk<Job & { raw?: unknown }>('result', { agent_id: job.agent_id, include_raw: true });
    expect(full.raw).toBeDefined();
  });
});

describe('the job table through the tools', () => {
  test('jobs past the concurrency limit (3) queue, and all finish', async () => {
    const jobs = await Promise.all(
      Array.from({ length: 5 }, (_, i) => spawn('claude', { prompt: `queue ${i} [[cli:sleep:1500]]` })),
    );
    const listed = await s.callOk<{ agents: Job[]; running: number; queued: number }>('list');
    expect(listed.running).toBe(3);
    expect(listed.queued).toBe(2);
    const ids = jobs.map((j) => j.agent_id);
    expect(listed.agents.map((a) => a.agent_id)).toEqual(expect.arrayContaining(ids));
    const waited = await waitAll(ids);
    expect(waited.finished.map((j) => j.state)).toEqual(Array(5).fill('succeeded'));
  });

  test('return_when any, and a wait that times out says what is pending', async () => {
    const fast = await spawn('codex', { prompt: 'fast one' });
    const slow = await spawn('codex', { prompt: 'slow one [[cli:sleep:4000]]' });
    const any = await s.callOk<Waited>('wait_for_agents', {
      agent_ids: [fast.agent_id, slow.agent_id],
      return_when: 'any',
      timeout_s: 30,
    });
    expect(any.finished.map((j) => j.agent_id)).toEqual([fast.agent_id]);
    expect(any.pending.map((j) => j.agent_id)).toEqual([slow.agent_id]);
    const short = await s.callOk<Waited>('wait_for_agents', { agent_ids: [slow.agent_id], timeout_s: 0.2 });
    expect(short).toMatchObject({ finished: [], timed_out: true });
    await waitAll([slow.agent_id]);
  });

  test('cancel stops a running agent and its grandchild, and a queued one before it starts', async () => {
    const gcFile = join(recordDir, `gc-${Date.now()}`);
    const hung = await spawn('copilot', { prompt: `cancel me [[cli:grandchild:${gcFile}]]` });
    const blockers = await Promise.all(
      [1, 2].map((i) => spawn('claude', { prompt: `blocker ${i} [[cli:sleep:2000]]` })),
    );
    const queued = await spawn('claude', { prompt: 'never runs' });
    expect(queued.state).toBe('queued');
    expect((await s.callOk<Job>('cancel', { agent_id: queued.agent_id })).state).toBe('cancelled');
    await waitFor('the grandchild', () => readdirSync(recordDir).includes(gcFile.split('/').pop()!));
    const grandchild = Number(readFileSync(gcFile, 'utf8'));
    const cancelled = await s.callOk<Job>('cancel', { agent_id: hung.agent_id });
    expect(cancelled.state).toBe('cancelled');
    await waitGone(recordOf('cancel me').pid);
    await waitGone(grandchild);
    await waitAll(blockers.map((b) => b.agent_id));
    expect(() => recordOf('never runs')).toThrow();
  });

  test('progress notifications arrive while wait_for_agents waits', async () => {
    const job = await spawn('codex', { prompt: 'progress [[cli:sleep:6500]]' });
    const progress: { progress: number; message?: string }[] = [];
    const result = await s.client.callTool(
      { name: 'wait_for_agents', arguments: { agent_ids: [job.agent_id], timeout_s: 30 } },
      undefined,
      {
        onprogress: (p) => progress.push(p),
        timeout: 60_000,
      },
    );
    expect((result.structuredContent as Waited).finished[0]!.state).toBe('succeeded');
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(progress[0]!.message).toBe('0 of 1 agents finished');
  });

  test('a cancelled wait request stops waiting; the server keeps serving and the job keeps running', async () => {
    const job = await spawn('claude', { prompt: 'outlives the wait [[cli:sleep:1500]]' });
    const controller = new AbortController();
    const waiting = s.client.callTool(
      { name: 'wait_for_agents', arguments: { agent_ids: [job.agent_id] } },
      undefined,
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort('changed my mind'), 200);
    await expect(waiting).rejects.toThrow();
    const listed = await s.callOk<{ agents: Job[] }>('list');
    expect(listed.agents.find((a) => a.agent_id === job.agent_id)!.state).toBe('running');
    expect((await waitAll([job.agent_id])).finished[0]!.state).toBe('succeeded');
  });
});

describe('bad input gets an error that says what to change, and the server keeps serving', () => {
  test.each([
    ['spawn_claude', {}, /prompt/],
    ['spawn_claude', { prompt: 42 }, /expected string, received number at prompt/],
    ['spawn_claude', { prompt: '   ' }, /prompt is empty/],
    ['spawn_claude', { prompt: 'x'.repeat(2_000_001) }, /longer than 2000000 characters/],
    ['spawn_claude', { prompt: 'x', timeout_s: -5 }, /timeout_s/],
    ['spawn_claude', { prompt: 'x', timeout_s: 1e12 }, /timeout_s/],
    ['spawn_claude', { prompt: 'x', wait_s: 'soon' }, /wait_s/],
    ['spawn_claude', { prompt: 'x', model: 'gpt-0' }, /unknown model "gpt-0" for claude: use one of/],
    ['spawn_claude', { prompt: 'x', cwd: '/no/such/folder' }, /cwd "\/no\/such\/folder" is not an existing folder/],
    ['spawn_claude', { prompt: 'x', resume: 'zzzzzz' }, /no agent with id "zzzzzz"/],
    ['spawn_copilot', { prompt: 'x', sytem_prompt: 'y' }, /Unrecognized key.*sytem_prompt/],
    ['spawn_grok', { prompt: 'x', cwd: '.' }, /Unrecognized key.*cwd/],
    ['result', { agent_id: 'nosuch' }, /no agent with id "nosuch": call `list`/],
    ['result', {}, /agent_id/],
    ['cancel', { agent_id: 'nosuch' }, /no agent with id/],
    ['wait_for_agents', { agent_ids: ['nosuch'] }, /no agent with id/],
    ['wait_for_agents', { agent_ids: [] }, /agent_ids is empty/],
    ['wait_for_agents', { timeout_s: 99999 }, /timeout_s/],
    ['list', { recent: 'many' }, /recent/],
    ['spawn_gpt', { prompt: 'x' }, /Tool spawn_gpt not found/],
  ])('%s %#', async (name, args, message) => {
    expect(await errorText(name, args)).toMatch(message);
  });

  test('the server still answers after all of them', async () => {
    const job = await spawn('codex', { prompt: 'still alive', wait_s: 30 });
    expect(job.state).toBe('succeeded');
  });
});

describe('an unusable backend', () => {
  test('a missing CLI is reported in the instructions and as a clear error, with no job', async () => {
    const other = await startServer({
      env: {
        POLYSPAWN_CODEX_BIN: '/nonexistent/codex',
        PATH: `/usr/bin:/bin:${join(process.cwd(), 'test/fakes/bin')}`,
      },
    });
    try {
      expect(other.client.getInstructions()).toMatch(
        /spawn_codex: NOT usable here \(\/nonexistent\/codex .* is not an executable file/,
      );
      const text = (await other.call('spawn_codex', { prompt: 'x' })).content as { text: string }[];
      expect(text[0]!.text).toMatch(/spawn_codex cannot run here: \/nonexistent\/codex/);
      expect((await other.callOk<{ agents: Job[] }>('list')).agents).toEqual([]);
    } finally {
      await other.close();
    }
  });

  test('a CLI that is not on PATH names how to install it or point at it', async () => {
    const other = await startServer({ fakeClis: false, env: { PATH: '/usr/bin:/bin' } });
    try {
      const result = await other.call('spawn_copilot', { prompt: 'x' });
      expect((result.content as { text: string }[])[0]!.text).toMatch(
        /`copilot` is not on PATH: install it with `npm install -g @github\/copilot`, or set POLYSPAWN_COPILOT_BIN/,
      );
    } finally {
      await other.close();
    }
  });
});
