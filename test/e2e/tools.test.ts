// The built server, driven by the SDK's own Client over stdio, with the fake CLIs on PATH.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { groupMembers, recordOf, recordsOf, waitFor, waitGone } from '../helpers/processes.js';

// A wait that is never woken runs until its timeout_s: the waiting tests below fail then, with
// an assertion rather than vitest's own time-out.
vi.setConfig({ testTimeout: 150_000 });

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
  cost_note?: string;
  exit_code?: number | null;
  started_at?: string;
  ended_at?: string;
  elapsed_s: number;
  raw?: unknown;
};
type Waited = { finished: Job[]; pending: Job[]; timed_out: boolean };

const recordDir = mkdtempSync(join(tmpdir(), 'polyspawn-e2e-records-'));

const tempDirs = [recordDir];
let s: TestServer;
beforeAll(async () => {
  s = await startServer({ env: { FAKE_CLI_RECORD: recordDir, CLAUDECODE: '1', POLYSPAWN_CONCURRENCY: '3' } });
});
afterAll(async () => {
  await s?.close();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * What waiting tests pass as timeout_s (or wait_s), and the time within which the wait must
 * return: a wait not woken by its jobs finishing (only by its timer) fails. Far apart, so that a
 * busy machine never makes a woken wait look like one that ran out.
 */
const LONG_WAIT_S = 60;
const WOKEN_WITHIN_MS = 20_000;
const expectWoken = (startedAt: number, what: string) => {
  const ms = Date.now() - startedAt;
  expect(ms, `${what} returned after ${ms} ms: not woken by the job finishing`).toBeLessThan(WOKEN_WITHIN_MS);
};

const spawn = (backend: string, args: Record<string, unknown>) => s.callOk<Job>(`spawn_${backend}`, args);
/** spawn_<backend> with wait_s: the finished job, woken by its end. */
const spawnAndWait = async (backend: string, args: Record<string, unknown>) => {
  const startedAt = Date.now();
  const job = await s.callOk<Job>(`spawn_${backend}`, { ...args, wait_s: LONG_WAIT_S });
  expectWoken(startedAt, `spawn_${backend} with wait_s`);
  return job;
};
/** wait_for_agents for every one of `ids`: woken by the last one finishing. */
const waitAll = async (ids: string[]) => {
  const startedAt = Date.now();
  const waited = await s.callOk<Waited>('wait_for_agents', { agent_ids: ids, timeout_s: LONG_WAIT_S });
  expectWoken(startedAt, 'wait_for_agents');
  expect(waited).toMatchObject({ pending: [], timed_out: false });
  return waited;
};

describe('the tool list', () => {
  test('every tool has a title, a description, an input schema, an output schema and every hint', async () => {
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
      // For the clients that show or type results; the Client checks every result below against outputSchema.
      expect(tool.title, tool.name).toBeTruthy();
      expect(tool.outputSchema?.type, tool.name).toBe('object');
      expect(Object.keys(tool.annotations ?? {}).sort(), tool.name).toEqual([
        'destructiveHint',
        'idempotentHint',
        'openWorldHint',
        'readOnlyHint',
      ]);
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    const hints = (name: string) => byName[name]!.annotations;
    expect(hints('spawn_claude')).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(hints('spawn_grok')).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    expect(hints('list')).toEqual({
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    });
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
    expect(Object.keys(byBackend).sort()).toEqual(['claude', 'codex', 'copilot']);
    expect(byBackend.claude).toMatchObject({ model: 'sonnet', cost_source: 'reported', cost_usd: 0.000188 });
    expect(byBackend.codex).toMatchObject({ model: 'gpt-5.5', cost_source: 'estimated' });
    expect(byBackend.codex!.cost_usd).toBeCloseTo((12 * 1.25 + 7 * 10) / 1e6);
    expect(byBackend.copilot).toMatchObject({ cost_source: 'unknown', premium_requests: 1 });

    // raw: only on request, and it is what the CLI's final record held.
    for (const job of waited.finished) expect(job).not.toHaveProperty('raw');
    const raw = async (job: Job) => (await s.callOk<Job>('result', { agent_id: job.agent_id, include_raw: true })).raw;
    const { claude, codex, copilot } = byBackend as Record<string, Job>;
    expect(await raw(claude!)).toMatchObject({
      type: 'result',
      is_error: false,
      result: claude!.text,
      session_id: claude!.session_id,
      total_cost_usd: 0.000188,
    });
    expect(await raw(codex!)).toMatchObject({
      thread_id: codex!.session_id,
      last_message: { type: 'item.completed', item: { type: 'agent_message', text: codex!.text } },
      usage: { input_tokens: 12, output_tokens: 7 },
    });
    expect(await raw(copilot!)).toMatchObject({
      type: 'result',
      sessionId: copilot!.session_id,
      exitCode: 0,
      usage: { premiumRequests: 1 },
    });
  });

  test('the prompt reaches the CLI on stdin, intact: leading dashes, non-ASCII, 1 MB', async () => {
    const marker = `m${Date.now()}`;
    const prompt = `--dangerous ${marker} Grüße 日本語 🎉 ` + 'x'.repeat(1_000_000);
    const job = await spawnAndWait('codex', { prompt });
    expect(job.state).toBe('succeeded');
    const record = recordOf(recordDir, marker);
    expect(record.prompt).toBe(prompt);
    expect(record.argv.join(' ')).not.toContain(marker);
  });

  test('model aliases, system prompt and cwd reach the CLI as flags', async () => {
    const marker = `flags${Date.now()}`;
    const cwd = mkdtempSync(join(s.projectDir, 'cwd-'));
    const job = await spawnAndWait('claude', { prompt: marker, model: 'opus', system_prompt: 'Be brief.', cwd });
    expect(job).toMatchObject({ state: 'succeeded', model: 'opus' });
    const record = recordOf(recordDir, marker);
    expect(record.argv).toEqual(expect.arrayContaining(['--model', 'opus']));
    // The caller's system prompt, then the line about the channel to the orchestrator.
    const systemPrompt = record.files[record.argv[record.argv.indexOf('--append-system-prompt-file') + 1]!];
    expect(systemPrompt).toMatch(/^Be brief\.\n\nWhen a decision is not yours to make, ask the orchestrator/);
    expect(record.cwd).toBe(cwd);
    expect(record.env.CLAUDECODE).toBeNull(); // removed although the server has it
  });

  test('a model polyspawn does not know reaches the CLI as named, and the result says its cost is unknown', async () => {
    const marker = `newmodel${Date.now()}`;
    const job = await spawnAndWait('codex', { prompt: marker, model: 'gpt-6-preview' });
    expect(job).toMatchObject({ state: 'succeeded', model: 'gpt-6-preview', cost_source: 'unknown' });
    expect(job.usage).toBeDefined(); // tokens were counted, but no price is known for them
    expect(job.cost_usd).toBeUndefined();
    expect(job.cost_note).toMatch(
      /^model "gpt-6-preview" is not in polyspawn's models table: it is passed to codex as named, and its cost is unknown.*models\.json/,
    );
    expect(recordOf(recordDir, marker).argv).toEqual(expect.arrayContaining(['--model', 'gpt-6-preview']));
    const known = await spawnAndWait('codex', { prompt: `known ${marker}`, model: 'fast' });
    expect(known.cost_source).toBe('estimated');
    expect(known.cost_note).toBeUndefined();
  });

  test('resume: an earlier agent_id or a raw session id continues its session', async () => {
    const first = await spawnAndWait('claude', { prompt: 'first turn' });
    const second = await spawnAndWait('claude', {
      prompt: `second turn ${first.agent_id}`,
      resume: first.agent_id,
    });
    expect(second.session_id).toBe(first.session_id);
    expect(recordOf(recordDir, `second turn ${first.agent_id}`).argv).toEqual(
      expect.arrayContaining([`--resume=${first.session_id}`]),
    );
    const codexFirst = await spawnAndWait('codex', { prompt: 'codex first' });
    const codexSecond = await spawnAndWait('codex', { prompt: 'codex second', resume: codexFirst.session_id });
    expect(codexSecond.session_id).toBe(codexFirst.session_id);
    expect(recordOf(recordDir, 'codex second').argv.slice(0, 2)).toEqual(['exec', 'resume']);
    expect(await s.callError('spawn_codex', { prompt: 'x', resume: first.agent_id })).toMatch(
      /ran on claude, not codex/,
    );
  });

  test('failures: a CLI error, malformed output and a time-out end as failed or timed_out with a reason', async () => {
    const failed = await spawnAndWait('codex', { prompt: '[[cli:fail]]' });
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/codex reported an error: .*\(log: .*stdout\.log\)/);
    const malformed = await spawnAndWait('claude', { prompt: '[[cli:malformed]]' });
    expect(malformed).toMatchObject({ state: 'failed', error: expect.stringMatching(/malformed or truncated/) });
    const truncated = await spawnAndWait('copilot', { prompt: '[[cli:truncated]]' });
    expect(truncated).toMatchObject({ state: 'failed', error: expect.stringMatching(/malformed or truncated/) });
    const slow = await spawnAndWait('claude', { prompt: 'slow [[cli:hang]]', timeout_s: 1 });
    expect(slow).toMatchObject({ state: 'timed_out', error: expect.stringMatching(/timed out after 1 s/) });
    // On a busy machine the CLI may be ended before it wrote its record.
    for (const { pid } of recordsOf(recordDir, 'slow [[cli:hang]]')) await waitGone(pid);
  });

  test('a time-out ends the whole process group: a CLI that ignores SIGTERM, and its grandchild', async () => {
    const marker = `timeout-group-${Date.now()}`;
    const gcFile = join(recordDir, `gc-${marker}`);
    // The time-out leaves the CLI time to start its grandchild and install its handler first.
    const job = await spawn('claude', {
      prompt: `${marker} [[cli:ignore-term]] [[cli:grandchild:${gcFile}]]`,
      timeout_s: 8,
    });
    await waitFor('the grandchild', () => existsSync(gcFile), 20_000);
    const leader = recordOf(recordDir, marker).pid;
    const grandchild = Number(readFileSync(gcFile, 'utf8'));
    expect(groupMembers(leader)).toEqual(expect.arrayContaining([leader, grandchild]));
    const [timedOut] = (await waitAll([job.agent_id])).finished;
    expect(timedOut).toMatchObject({ state: 'timed_out', error: expect.stringMatching(/timed out after 8 s/) });
    expect(timedOut!.elapsed_s).toBeGreaterThanOrEqual(8 - 0.1);
    await waitGone(leader);
    await waitGone(grandchild);
    expect(groupMembers(leader)).toEqual([]);
  });

  test('wait_s returns early when the job outlives it; result shows a running job, and how long a job ran', async () => {
    const job = await spawn('codex', { prompt: 'long [[cli:sleep:3000]]', wait_s: 0.5 });
    expect(job.state).toBe('running');
    const before = Date.now();
    const running = await s.callOk<Job>('result', { agent_id: job.agent_id });
    const after = Date.now();
    expect(running.state).toBe('running');
    // The seconds since it started when the server answered, rounded to 0.1 s.
    const startedAt = Date.parse(running.started_at!);
    expect(running.elapsed_s).toBeGreaterThanOrEqual((before - startedAt) / 1000 - 0.06);
    expect(running.elapsed_s).toBeLessThanOrEqual((after - startedAt) / 1000 + 0.06);

    const [done] = (await waitAll([job.agent_id])).finished;
    expect(done!.state).toBe('succeeded');
    // It slept 3 s; once finished, elapsed_s is its start-to-end time, and stays so.
    expect(done!.elapsed_s).toBeGreaterThanOrEqual(3 - 0.1);
    const ranFor = (Date.parse(done!.ended_at!) - Date.parse(done!.started_at!)) / 1000;
    expect(Math.abs(done!.elapsed_s - ranFor)).toBeLessThanOrEqual(0.051);
    // A second later it still reports its run time, not the time since it started.
    const endedAt = Date.parse(done!.ended_at!);
    await waitFor('a second to pass since it ended', () => Date.now() > endedAt + 1000);
    const full = await s.callOk<Job>('result', { agent_id: job.agent_id, include_raw: true });
    expect(full.elapsed_s).toBe(done!.elapsed_s);
    expect(full.raw).toMatchObject({
      thread_id: full.session_id,
      last_message: { type: 'item.completed', item: { text: 'FAKE codex: long [[cli:sleep:3000]]' } },
    });
  });
});

describe('the job table through the tools', () => {
  test('jobs past the concurrency limit (3) queue, and start as slots free up', async () => {
    // Its own server: no other test's jobs hold a slot.
    const dir = mkdtempSync(join(tmpdir(), 'polyspawn-e2e-queue-'));
    tempDirs.push(dir);
    const own = await startServer({ env: { FAKE_CLI_RECORD: dir, POLYSPAWN_CONCURRENCY: '3' } });
    try {
      type Listed = { agents: Job[]; running: number; queued: number };
      const untilListed = async (running: number, queued: number): Promise<Listed> => {
        const deadline = Date.now() + 20_000;
        for (;;) {
          const listed = await own.callOk<Listed>('list');
          if (listed.running === running && listed.queued === queued) return listed;
          if (Date.now() > deadline)
            throw new Error(`list shows ${listed.running} running, ${listed.queued} queued, not ${running}, ${queued}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      const cancel = async (id: string) =>
        expect((await own.callOk<Job>('cancel', { agent_id: id })).state).toBe('cancelled');
      /** The CLIs started for job i (its prompt is `queue i ...`). */
      const clis = (i: number) => recordsOf(dir, `queue ${i} `);

      const jobs = await Promise.all(
        Array.from({ length: 5 }, (_, i) => own.callOk<Job>('spawn_claude', { prompt: `queue ${i} [[cli:hang]]` })),
      );
      const ids = jobs.map((j) => j.agent_id);
      const listed = await untilListed(3, 2);
      expect(listed.agents.map((a) => a.agent_id).sort()).toEqual([...ids].sort());
      const stateOf = (i: number) => listed.agents.find((a) => a.agent_id === ids[i])!.state;
      const running = [0, 1, 2, 3, 4].filter((i) => stateOf(i) === 'running');
      const queued = [0, 1, 2, 3, 4].filter((i) => stateOf(i) === 'queued');
      expect([running.length, queued.length]).toEqual([3, 2]);
      // The three running jobs run one CLI each.
      await waitFor('the three CLIs', () => running.every((i) => clis(i).length === 1));

      // A queued job cancelled never starts; a running one cancelled gives its slot to the next.
      await cancel(ids[queued[0]!]!);
      await untilListed(3, 1);
      await cancel(ids[running[0]!]!);
      await untilListed(3, 0);
      await waitFor('the last queued job to start its CLI', () => clis(queued[1]!).length === 1);
      expect(clis(running[0]!)).toHaveLength(1);

      for (const i of [...running.slice(1), queued[1]!]) await cancel(ids[i]!);
      const after = await untilListed(0, 0);
      expect(after.agents.map((a) => a.state)).toEqual(Array(5).fill('cancelled'));
      expect(clis(queued[0]!)).toEqual([]);
      for (const i of [0, 1, 2, 3, 4]) for (const { pid } of clis(i)) await waitGone(pid);
    } finally {
      await own.close();
    }
  });

  test('return_when any, and a wait that times out says what is pending', async () => {
    const fast = await spawn('codex', { prompt: 'fast one' });
    const slow = await spawn('codex', { prompt: 'slow one [[cli:hang]]' });
    const startedAt = Date.now();
    const any = await s.callOk<Waited>('wait_for_agents', {
      agent_ids: [fast.agent_id, slow.agent_id],
      return_when: 'any',
      timeout_s: LONG_WAIT_S,
    });
    expectWoken(startedAt, 'wait_for_agents return_when any');
    expect(any.timed_out).toBe(false);
    expect(any.finished.map((j) => j.agent_id)).toEqual([fast.agent_id]);
    expect(any.pending.map((j) => j.agent_id)).toEqual([slow.agent_id]);
    const short = await s.callOk<Waited>('wait_for_agents', { agent_ids: [slow.agent_id], timeout_s: 0.2 });
    expect(short).toMatchObject({ finished: [], timed_out: true });
    expect(short.pending.map((j) => j.agent_id)).toEqual([slow.agent_id]);
    await waitFor('the slow CLI to start', () => recordsOf(recordDir, 'slow one [[cli:hang]]').length === 1);
    const slowCli = recordOf(recordDir, 'slow one [[cli:hang]]').pid;
    expect((await s.callOk<Job>('cancel', { agent_id: slow.agent_id })).state).toBe('cancelled');
    await waitGone(slowCli);
  });

  test('cancel stops a running agent and its grandchild, and a queued one before it starts', async () => {
    const gcFile = join(recordDir, `gc-${Date.now()}`);
    const hung = await spawn('copilot', { prompt: `cancel me [[cli:grandchild:${gcFile}]]` });
    // With the hung one, they take the 3 slots until cancelled.
    const blockers = await Promise.all([1, 2].map((i) => spawn('claude', { prompt: `blocker ${i} [[cli:hang]]` })));
    const queued = await spawn('claude', { prompt: 'never runs' });
    expect(queued.state).toBe('queued');
    expect((await s.callOk<Job>('cancel', { agent_id: queued.agent_id })).state).toBe('cancelled');
    await waitFor('the grandchild', () => existsSync(gcFile));
    const grandchild = Number(readFileSync(gcFile, 'utf8'));
    const leader = recordOf(recordDir, 'cancel me').pid;
    const cancelled = await s.callOk<Job>('cancel', { agent_id: hung.agent_id });
    expect(cancelled.state).toBe('cancelled');
    await waitGone(leader);
    await waitGone(grandchild);
    expect(groupMembers(leader)).toEqual([]);
    for (const b of blockers) expect((await s.callOk<Job>('cancel', { agent_id: b.agent_id })).state).toBe('cancelled');
    expect(() => recordOf(recordDir, 'never runs')).toThrow();
  });

  test('progress notifications arrive while wait_for_agents waits', async () => {
    const job = await spawn('codex', { prompt: 'progress [[cli:hang]]' });
    const progress: { progress: number; message?: string }[] = [];
    // The job ends once the first notification has arrived, which wakes the wait.
    let cancelled: Promise<Job> | undefined;
    const startedAt = Date.now();
    const result = await s.client.callTool(
      { name: 'wait_for_agents', arguments: { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S } },
      undefined,
      {
        onprogress: (p) => {
          progress.push(p);
          cancelled ??= s.callOk<Job>('cancel', { agent_id: job.agent_id });
        },
        timeout: 120_000,
      },
    );
    expectWoken(startedAt, 'wait_for_agents');
    expect(progress[0]).toMatchObject({ message: '0 of 1 agents finished' });
    expect((await cancelled!).state).toBe('cancelled');
    expect((result.structuredContent as Waited).finished.map((j) => j.state)).toEqual(['cancelled']);
  });

  test('a cancelled wait request stops waiting; the server keeps serving and the job keeps running', async () => {
    const job = await spawn('claude', { prompt: 'outlives the wait [[cli:sleep:5000]]' });
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
    ['spawn_claude', { prompt: 'x', model: '--yolo' }, /unknown model "--yolo" for claude, and not a plain model name/],
    ['spawn_claude', { prompt: 'x', cwd: '/no/such/folder' }, /cwd "\/no\/such\/folder" is not an existing folder/],
    ['spawn_claude', { prompt: 'x', cwd: '/' }, /cwd "\/" is outside the project .*allow_cwd_outside_project/],
    ['spawn_codex', { prompt: 'x', cwd: '../..' }, /is outside the project/],
    ['spawn_claude', { prompt: 'x', resume: 'zzzzzz' }, /no agent with id "zzzzzz"/],
    ['spawn_codex', { prompt: 'x', resume: '--dangerously-bypass-approvals-and-sandbox' }, /resume: pass an agent_id/],
    ['spawn_codex', { prompt: 'x', resume: '--last' }, /resume: pass an agent_id/],
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
    expect(await s.callError(name, args)).toMatch(message);
  });

  test('the server still answers after all of them', async () => {
    const job = await spawnAndWait('codex', { prompt: 'still alive' });
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
