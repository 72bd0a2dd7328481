// The real claude, codex and copilot CLIs, driven through the MCP server end to end against
// the project's fake model API on 127.0.0.1: a first turn, a resumed second turn, an API
// error, a system prompt that reaches the model, and a tool the default permissions allow.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FakeModelApi } from '../fakes/model-api.js';
import type { TestServer } from '../helpers/mcp.js';
import { startContractRig, type ContractRig } from './clis.js';
import type { Job } from '../helpers/jobs.js';

let rig: ContractRig;
let api: FakeModelApi;
let server: TestServer;
const project = () => server.projectDir;

beforeAll(async () => {
  // Nested inside Claude Code this would be set; polyspawn must remove it for claude.
  rig = await startContractRig({ CLAUDECODE: '1' });
  ({ api, server } = rig);
}, 900_000);

afterAll(() => rig?.close());

const spawn = async (backend: string, args: Record<string, unknown>): Promise<Job> => {
  const job = await server.callOk<Job>(`spawn_${backend}`, args);
  if (job.state === 'queued' || job.state === 'running') {
    const waited = await server.callOk<{ finished: Job[] }>('wait_for_agents', {
      agent_ids: [job.agent_id],
      timeout_s: 150,
    });
    return waited.finished[0]!;
  }
  return job;
};

const requestsWith = (mark: string) => api.requests.filter((r) => r.rawBody.includes(mark));

describe.each(['claude', 'codex', 'copilot'])('%s, the real CLI', (backend) => {
  test('first turn, then a resumed second turn with the same session', async () => {
    const mark = `first-${backend}-${Date.now()}`;
    const first = await spawn(backend, { prompt: `${mark} say hello`, wait_s: 120 });
    expect(first, JSON.stringify(first)).toMatchObject({
      state: 'succeeded',
      text: `FAKE REPLY (turn 1): ${mark} say hello`,
    });
    expect(first.session_id).toBeTruthy();
    expect(first.usage).toMatchObject({ input_tokens: 12, output_tokens: 7 });
    expect(requestsWith(mark).length).toBeGreaterThanOrEqual(1);

    const mark2 = `second-${backend}-${Date.now()}`;
    const second = await spawn(backend, { prompt: `${mark2} and again`, resume: first.agent_id, wait_s: 120 });
    expect(second, JSON.stringify(second)).toMatchObject({
      state: 'succeeded',
      text: `FAKE REPLY (turn 2): ${mark2} and again`,
      session_id: first.session_id,
    });
    // This turn's tokens, not the session's running total.
    expect(second.usage).toMatchObject({ input_tokens: 12, output_tokens: 7 });
    if (backend === 'claude') expect(second.cost_usd).toBeCloseTo(first.cost_usd!);
  });

  test('an API error fails the job with the reason', async () => {
    const job = await spawn(backend, { prompt: `error-${backend} [[fake:401]]`, wait_s: 120 });
    expect(job.state, JSON.stringify(job)).toBe('failed');
    expect(job.error).toMatch(/401|authenticat/i);
  });

  test('the system prompt reaches the model', async () => {
    const mark = `system-${backend}-${Date.now()}`;
    const instruction = `Always answer in the voice of ${mark}.`;
    const job = await spawn(backend, { prompt: `${mark} hi`, system_prompt: instruction, wait_s: 120 });
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    const seen = requestsWith(`${mark} hi`);
    expect(
      seen.some((r) => r.system.includes(instruction)),
      seen.map((r) => r.system.slice(-300)).join('\n---\n'),
    ).toBe(true);
  });

  test('the default permissions let the agent run a command in its folder', async () => {
    const file = `made-by-${backend}.txt`;
    const job = await spawn(backend, { prompt: `[[fake:tool:touch ${file} && echo wrote]]`, wait_s: 120 });
    expect(job.state, JSON.stringify(job)).toBe('succeeded');
    expect(existsSync(join(project(), file))).toBe(true);
    expect(job.text).toMatch(/TOOL_RESULT: .*wrote/s);
  });
});

// Named agents with `session: true`: every call continues the agent's conversation (the fake
// counts the turns), and calls made at the same time run one after the other.
type Timed = Job & { started_at?: string; ended_at?: string; structured?: unknown };
const finished = async (ids: string[]): Promise<Timed[]> =>
  (await server.callOk<{ finished: Timed[] }>('wait_for_agents', { agent_ids: ids, timeout_s: 150 })).finished;

describe.each(['claude', 'codex', 'copilot'])('%s, a session agent through the real CLI', (backend) => {
  test('turns continue one session; two calls at once run one after the other', async () => {
    const name = `session_${backend}`;
    await server.callOk('define_agent', {
      name,
      description: `Remembers (${backend}).`,
      backend,
      system_prompt: 'You remember.',
      session: true,
    });
    const mark = `sess-${backend}-${Date.now()}`;
    const first = await spawn(name, { prompt: `${mark} one`, wait_s: 120 });
    expect(first, JSON.stringify(first)).toMatchObject({
      state: 'succeeded',
      text: `FAKE REPLY (turn 1): ${mark} one`,
    });
    const [a, b] = await Promise.all([
      server.callOk<Timed>(`spawn_${name}`, { prompt: `${mark} A` }),
      server.callOk<Timed>(`spawn_${name}`, { prompt: `${mark} B` }),
    ]);
    const done = (await finished([a.agent_id, b.agent_id])).sort(
      (x, y) => Date.parse(x.started_at!) - Date.parse(y.started_at!),
    );
    for (const job of done)
      expect(job, JSON.stringify(job)).toMatchObject({ state: 'succeeded', session_id: first.session_id });
    expect(Date.parse(done[1]!.started_at!)).toBeGreaterThanOrEqual(Date.parse(done[0]!.ended_at!));
    expect(done.map((j) => j.text!.slice(0, 'FAKE REPLY (turn 2)'.length)).sort()).toEqual([
      'FAKE REPLY (turn 2)',
      'FAKE REPLY (turn 3)',
    ]);
    // This turn's tokens, not the session's running total.
    expect(done[1]!.usage).toMatchObject({ input_tokens: 12, output_tokens: 7 });
  });
});

// Structured output. The fake model API cannot answer in JSON of its own (it echoes the prompt,
// and never calls claude's StructuredOutput tool), so: the CLIs must accept the schema flags and
// send the schema on; an echoed ```json block in the prompt makes a matching answer (codex,
// copilot); claude's answer never matches, which exercises the retry in the same session.
test('claude: a system prompt over the 128 KiB a command-line argument may hold reaches the model (from a file)', async () => {
  const mark = `system-large-${Date.now()}`;
  const instruction = `Always answer in the voice of ${mark}. ${'Keep it short. '.repeat(10_000)}`;
  expect(Buffer.byteLength(instruction)).toBeGreaterThan(128 * 1024);
  const job = await spawn('claude', { prompt: `${mark} hi`, system_prompt: instruction, wait_s: 120 });
  expect(job.state, JSON.stringify(job)).toBe('succeeded');
  expect(requestsWith(`${mark} hi`).some((r) => r.system.includes(instruction.trim()))).toBe(true);
});

// Budgets: claude enforces both itself (--max-turns, which its --help does not list, and
// --max-budget-usd); the tool call makes a second turn, the first request's cost passes the budget.
describe('claude budgets, the real CLI', () => {
  test.each([
    [{ max_turns: 1 }, 'turns', /^stopped: it reached max_turns \(1\) after 2 turns, \$[\d.]+ \(log: /],
    [
      { max_budget_usd: 0.0000001 },
      'cost',
      /^stopped: it reached max_budget_usd \(\$1e-7\) after 1 turn, \$[\d.]+ \(log: /,
    ],
  ])('claude budget %j: it stops itself and the job fails naming the budget', async (budget, kind, error) => {
    const mark = `budget-${kind}-${Date.now()}`;
    const job = await spawn('claude', { prompt: `${mark} [[fake:tool:echo ${mark}]]`, budget, wait_s: 120 });
    expect(job, JSON.stringify(job)).toMatchObject({ state: 'failed', error: expect.stringMatching(error) });
    expect((job as Job & { budget?: unknown }).budget).toEqual({ ...budget, exceeded: kind });
  });
});

describe('structured output through the real CLIs', () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string' } },
    required: ['name'],
    additionalProperties: false,
  };

  test('claude: --json-schema reaches the model as the StructuredOutput tool; a mismatch is retried once in the session, then fails', async () => {
    const mark = `so-claude-${Date.now()}`;
    const job = await spawn('claude', { prompt: `${mark} name a thing`, output_schema: schema, wait_s: 150 });
    expect(job.state, JSON.stringify(job)).toBe('failed');
    expect(job.error).toMatch(/did not match the output schema, also after one retry/);
    const first = requestsWith(mark);
    expect(first[0]!.tools).toContain('StructuredOutput');
    const retry = api.requests.filter(
      (r) => r.rawBody.includes('Your answer did not match the required JSON Schema') && r.rawBody.includes(mark),
    );
    expect(retry.length).toBeGreaterThanOrEqual(1);
    expect(retry[0]!.turn).toBeGreaterThan(1); // the same conversation, resumed
  });

  test.each(['codex', 'copilot'])('%s: a matching answer lands in structured', async (backend) => {
    const mark = `so-${backend}-${Date.now()}`;
    const job = (await spawn(backend, {
      prompt: `${mark}\n\`\`\`json\n{"name": "${backend}"}\n\`\`\``,
      output_schema: schema,
      wait_s: 150,
    })) as Timed;
    expect(job, JSON.stringify(job)).toMatchObject({ state: 'succeeded', structured: { name: backend } });
    if (backend === 'codex') {
      // --output-schema: the Responses request asks for JSON in that shape.
      const body = requestsWith(mark)[0]!.body as { text?: { format?: { type?: string; schema?: unknown } } };
      expect(body.text?.format).toMatchObject({
        type: 'json_schema',
        schema: expect.objectContaining({ required: ['name'] }),
      });
    }
  });
});
