// 1,000 malformed tool calls, generated from a fixed seed: unknown tools, missing fields, values
// of every wrong type, huge strings, unknown keys, invalid UTF-8 bytes and lone surrogates in
// strings, arguments that are not an object. Every one gets an error that names the problem
// (the field, the tool, or what the value should be), none starts a job, and the server then
// answers a valid call.
import { afterAll, describe, expect, test } from 'vitest';
import { startRpcServer, stopAllAndCollectStdoutProblems, type RpcResponse } from '../helpers/rpc.js';

afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
});

/** mulberry32: a small seeded PRNG, so a failure names a case that can be run again. */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Case = { label: string; params: unknown; raw?: Buffer[]; expect: RegExp };
/** Where a string value holds RAW, the request's bytes there are replaced by raw bytes (not JSON-encodable). */
const RAW = '__RAW_BYTES__';
const INVALID_UTF8 = [
  Buffer.from([0xff]),
  Buffer.from([0xfe, 0xff]),
  Buffer.from([0xc3, 0x28]),
  Buffer.from([0xe2, 0x82]),
  Buffer.from([0xf0, 0x28, 0x8c, 0xbc]),
  Buffer.from([0xed, 0xa0, 0x80]),
];

function generate(count: number, seed: number): Case[] {
  const rand = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const word = (n = 1 + Math.floor(rand() * 12)) =>
    Array.from({ length: n }, () => pick('abcdefghijklmnopqrstuvwxyz_0123456789'.split(''))).join('');
  const wrongFor: Record<string, unknown[]> = {
    string: [42, -1.5, true, false, null, [], ['x'], {}, { a: 1 }],
    integer: ['7', 'seven', true, null, [], {}, 1.5, -3],
    number: ['7', 'soon', true, null, [], {}],
    boolean: ['yes', 1, 0, null, [], {}],
    array: ['abc', 42, true, null, {}],
  };
  // Each tool's fields and what they take; `min` ones are out of range below 0.
  const fields: Record<string, Record<string, string>> = {
    spawn_claude: {
      prompt: 'string',
      model: 'string',
      cwd: 'string',
      system_prompt: 'string',
      resume: 'string',
      timeout_s: 'integer',
      wait_s: 'number',
    },
    spawn_codex: { prompt: 'string', model: 'string', cwd: 'string', timeout_s: 'integer', wait_s: 'number' },
    spawn_copilot: { prompt: 'string', model: 'string', timeout_s: 'integer' },
    spawn_grok: { prompt: 'string', temperature: 'number', max_output_tokens: 'integer' },
    list: { recent: 'integer' },
    result: { agent_id: 'string', include_raw: 'boolean' },
    wait_for_agents: { agent_ids: 'array', timeout_s: 'number' },
    cancel: { agent_id: 'string' },
    logs: { agent_id: 'string', offset: 'integer', limit: 'integer', tail: 'integer' },
    reply_subagent: { agent_id: 'string', message_id: 'string', answer: 'string' },
    integrate: { agent_id: 'string', how: 'string' },
  };
  const required: Record<string, Record<string, unknown>> = {
    spawn_claude: { prompt: 'x' },
    spawn_codex: { prompt: 'x' },
    spawn_copilot: { prompt: 'x' },
    spawn_grok: { prompt: 'x' },
    list: {},
    result: { agent_id: 'nosuch' },
    wait_for_agents: {},
    cancel: { agent_id: 'nosuch' },
    logs: { agent_id: 'nosuch' },
    reply_subagent: { agent_id: 'nosuch', message_id: 'q1', answer: 'x' },
    integrate: { agent_id: 'nosuch', how: 'patch' },
  };
  const tools = Object.keys(fields);
  const kinds = [
    'unknown-tool',
    'missing',
    'wrong-type',
    'huge',
    'unknown-key',
    'bad-utf8',
    'surrogate',
    'out-of-range',
    'not-an-object',
    'no-name',
  ] as const;
  const cases: Case[] = [];
  for (let i = 0; i < count; i++) {
    const kind = kinds[i % kinds.length]!;
    const tool = pick(tools);
    const base = () => ({ ...required[tool] });
    switch (kind) {
      case 'unknown-tool': {
        const name = pick(['spawn_', 'get_', '', 'list_', 'LIST']) + word();
        cases.push({
          label: `unknown tool ${name}`,
          params: { name, arguments: {} },
          expect: new RegExp(`Tool ${name} not found`),
        });
        break;
      }
      case 'missing': {
        const [tool2, field] = pick([
          ['spawn_claude', 'prompt'],
          ['spawn_codex', 'prompt'],
          ['spawn_grok', 'prompt'],
          ['result', 'agent_id'],
          ['cancel', 'agent_id'],
          ['logs', 'agent_id'],
          ['reply_subagent', 'agent_id'],
          ['reply_subagent', 'message_id'],
          ['reply_subagent', 'answer'],
          ['integrate', 'agent_id'],
        ] as const);
        cases.push({
          label: `${tool2} without ${field}`,
          params: { name: tool2, arguments: {} },
          expect: new RegExp(`expected string, received undefined at ${field}`),
        });
        break;
      }
      case 'wrong-type': {
        const field = pick(Object.keys(fields[tool]!));
        const value = pick(wrongFor[fields[tool]![field]!]!);
        cases.push({
          label: `${tool}.${field} = ${JSON.stringify(value)}`,
          params: { name: tool, arguments: { ...base(), [field]: value } },
          expect: new RegExp(`at ${field}`),
        });
        break;
      }
      case 'huge': {
        const [tool2, field, size, message] = pick([
          [
            'spawn_codex',
            'prompt',
            2_000_001 + Math.floor(rand() * 100_000),
            /prompt is longer than 2000000 characters/,
          ],
          ['spawn_claude', 'model', 10_000, /Too big: expected string to have <=200 characters at model/],
          ['result', 'agent_id', 100_000, /Too big: expected string to have <=64 characters at agent_id/],
          ['cancel', 'agent_id', 65, /<=64 characters at agent_id/],
          ['spawn_claude', 'system_prompt', 250_000, /<=200000 characters at system_prompt/],
          ['reply_subagent', 'answer', 20_001 + Math.floor(rand() * 1_000_000), /<=20000 characters at answer/],
          ['reply_subagent', 'message_id', 100_000, /<=64 characters at message_id/],
        ] as const);
        cases.push({
          label: `${tool2}.${field} of ${size} characters`,
          params: { name: tool2, arguments: { ...required[tool2], [field]: 'x'.repeat(size) } },
          expect: message,
        });
        break;
      }
      case 'unknown-key': {
        const key = `${word()}_${i}`;
        cases.push({
          label: `${tool} with ${key}`,
          params: { name: tool, arguments: { ...base(), [key]: word() } },
          expect: new RegExp(`Unrecognized key.*${key}`),
        });
        break;
      }
      case 'bad-utf8': {
        // Invalid bytes where the value must name something that exists: the decoded value
        // (with U+FFFD) names nothing, and the error says so.
        const [tool2, args, message] = pick([
          ['result', { agent_id: `a${RAW}` }, /no agent with id/],
          ['cancel', { agent_id: `${RAW}` }, /no agent with id/],
          ['logs', { agent_id: `x${RAW}y` }, /no agent with id/],
          ['wait_for_agents', { agent_ids: [`${RAW}`] }, /no agent with id/],
          ['reply_subagent', { agent_id: `${RAW}`, message_id: 'q1', answer: 'x' }, /no agent with id/],
          ['integrate', { agent_id: `${RAW}`, how: 'discard' }, /no agent with id/],
          ['spawn_claude', { prompt: 'x', model: `son${RAW}net` }, /unknown model/],
          ['spawn_codex', { prompt: 'x', cwd: `/tmp/${RAW}` }, /is not an existing folder/],
          ['spawn_copilot', { prompt: `do ${RAW} it`, timeout_s: -1 }, /at timeout_s/],
          [`spawn_${RAW}`, { prompt: 'x' }, /not found/],
        ] as const);
        cases.push({
          label: `${tool2} with invalid UTF-8 in ${JSON.stringify(args)}`,
          params: { name: tool2, arguments: args },
          raw: [pick(INVALID_UTF8)],
          expect: message,
        });
        break;
      }
      case 'surrogate': {
        const lone = pick(['\ud800', '\udfff', 'a\udc00b', '\ud83d']);
        const [tool2, args, message] = pick([
          ['result', { agent_id: lone }, /no agent with id/],
          ['cancel', { agent_id: lone }, /no agent with id/],
          ['reply_subagent', { agent_id: lone, message_id: lone, answer: lone }, /no agent with id/],
          ['spawn_claude', { prompt: 'x', model: lone }, /unknown model/],
          ['spawn_codex', { prompt: lone, wait_s: 'no' }, /at wait_s/],
        ] as const);
        cases.push({
          label: `${tool2} with a lone surrogate`,
          params: { name: tool2, arguments: args },
          expect: message,
        });
        break;
      }
      case 'out-of-range': {
        const [tool2, field, value] = pick([
          ['spawn_claude', 'timeout_s', 0],
          ['spawn_codex', 'timeout_s', 1e12],
          ['spawn_codex', 'wait_s', -1],
          ['spawn_grok', 'temperature', 3],
          ['spawn_grok', 'max_output_tokens', 0],
          ['list', 'recent', -1],
          ['list', 'recent', 1001],
          ['wait_for_agents', 'timeout_s', 1e9],
          ['logs', 'limit', 0],
          ['logs', 'offset', -5],
          ['reply_subagent', 'answer', ''],
          ['reply_subagent', 'message_id', ''],
        ] as const);
        cases.push({
          label: `${tool2}.${field} = ${value}`,
          params: { name: tool2, arguments: { ...required[tool2], [field]: value } },
          expect: new RegExp(`at ${field}`),
        });
        break;
      }
      case 'not-an-object': {
        const value = pick([[], ['x'], 'args', 42, true]);
        cases.push({
          label: `${tool} with arguments ${JSON.stringify(value)}`,
          params: { name: tool, arguments: value },
          expect: /"arguments"[\s\S]*expected record/,
        });
        break;
      }
      case 'no-name': {
        const params = pick([{ arguments: {} }, { name: 42, arguments: {} }, { name: null }, { name: ['list'] }]);
        cases.push({
          label: `tools/call with ${JSON.stringify(params)}`,
          params,
          expect: /"name"[\s\S]*expected string/,
        });
        break;
      }
    }
  }
  return cases;
}

/** The request's bytes: JSON, with RAW markers replaced by the case's raw bytes. */
function requestBytes(id: number, c: Case): Buffer {
  const json = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: c.params }));
  if (!c.raw) return json;
  const parts: Buffer[] = [];
  let rest = json;
  for (let at = rest.indexOf(RAW); at >= 0; at = rest.indexOf(RAW)) {
    parts.push(rest.subarray(0, at), c.raw[0]!);
    rest = rest.subarray(at + RAW.length);
  }
  parts.push(rest);
  return Buffer.concat(parts);
}

const errorText = (r: RpcResponse): string | undefined => {
  if (r.error) return r.error.message;
  const result = r.result as { isError?: boolean; content?: { text: string }[] } | undefined;
  return result?.isError ? (result.content ?? []).map((c) => c.text).join('\n') : undefined;
};

describe('1,000 malformed tool calls', () => {
  test(
    'each gets an error naming its problem; none starts a job; a valid call works afterwards',
    { timeout: 180_000 },
    async () => {
      const cases = generate(1000, 7);
      expect(new Set(cases.map((c) => c.label.split(' ')[0])).size).toBeGreaterThan(5);
      const server = await startRpcServer({ env: { POLYSPAWN_CONCURRENCY: '4' } });
      const failures: string[] = [];
      for (let from = 0; from < cases.length; from += 50) {
        const answers = await Promise.all(
          cases.slice(from, from + 50).map(async (c, k) => {
            const id = server.nextId();
            return { c, n: from + k, r: await server.requestRaw(id, requestBytes(id, c)) };
          }),
        );
        for (const { c, n, r } of answers) {
          const text = errorText(r);
          if (text === undefined) failures.push(`#${n} ${c.label}: not an error: ${JSON.stringify(r).slice(0, 300)}`);
          else if (!c.expect.test(text)) failures.push(`#${n} ${c.label}: ${c.expect} not in: ${text.slice(0, 300)}`);
        }
      }
      expect(failures).toEqual([]);

      const listed = await server.callOk<{ agents: unknown[] }>('list', { recent: 1000 });
      expect(listed.agents).toEqual([]);
      const job = await server.callOk<{ agent_id: string; state: string; text: string }>('spawn_codex', {
        prompt: 'still here',
        wait_s: 30,
      });
      expect(job).toMatchObject({ state: 'succeeded', text: 'FAKE codex: still here' });
      // An agent that exists but asked nothing: the message id names no question of it.
      const unasked = await server.call('reply_subagent', { agent_id: job.agent_id, message_id: 'q1', answer: 'x' });
      expect(unasked.isError).toBe(true);
      expect(unasked.content?.[0]?.text).toMatch(`agent ${job.agent_id} asked no question "q1"`);
      expect(server.child.exitCode).toBeNull();
    },
  );
});

describe('lines the transport cannot take', () => {
  test(
    'the longest prompt of control characters is taken; a line past the limit, a non-JSON line and a non-JSON-RPC one get an error answer; later requests are answered',
    { timeout: 180_000 },
    async () => {
      const server = await startRpcServer();
      // 2,000,000 characters (the prompt's limit), 12 MB once JSON-escaped (\u0001 is six bytes).
      const prompt = `say hi ${'\u0001'.repeat(2_000_000 - 7)}`;
      const job = await server.callOk<{ agent_id: string; state: string }>('spawn_codex', { prompt, wait_s: 60 });
      expect(job.state).toBe('succeeded');

      // 40 MB: past the transport's limit, the id at its start.
      const id = server.nextId();
      const filler = Buffer.alloc(40 * 1024 * 1024, 'a');
      const head = Buffer.from(
        `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"list","arguments":{"x":"`,
      );
      const oversized = await server.requestRaw(id, Buffer.concat([head, filler, Buffer.from('"}}}')]));
      expect(oversized.error?.code).toBe(-32600);
      expect(oversized.error?.message).toMatch(/message too long: \d+ bytes, over the limit of \d+ bytes/);

      // Its id past the params: answered with id null, and the server still answers.
      const before = server.notifications.length;
      server.child.stdin.write(Buffer.concat([Buffer.from('{"params":"'), filler, Buffer.from('","id":5}\n')]));
      server.child.stdin.write('{"jsonrpc":"2.0","id": not json\n');
      const invalidId = server.nextId();
      const invalid = await server.requestRaw(invalidId, Buffer.from(`{"jsonrpc":"1.0","id":${invalidId}}`));
      expect(invalid.error?.code).toBe(-32600);
      expect(server.notifications.length).toBe(before);
      expect(server.unidentifiedErrors.map((e) => e.error?.code)).toEqual([-32600, -32700]);

      const listed = await server.callOk<{ agents: { agent_id: string }[] }>('list');
      expect(listed.agents.map((a) => a.agent_id)).toEqual([job.agent_id]);
      expect(server.child.exitCode).toBeNull();
    },
  );
});
