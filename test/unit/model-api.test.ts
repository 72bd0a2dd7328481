/**
 * The fake model API (test/fakes/model-api.ts): each protocol and each directive over plain
 * fetch, then the real SDKs once each (openai, @google/genai, @mistralai/mistralai). No
 * assertion here depends on how fast anything runs.
 */
import { ApiError, GoogleGenAI } from '@google/genai';
import { Mistral } from '@mistralai/mistralai';
import OpenAI, { AuthenticationError } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { FAKE_USAGE, startFakeModelApi, type FakeModelApi, type RecordedRequest } from '../fakes/model-api.js';

let api: FakeModelApi;

beforeAll(async () => {
  api = await startFakeModelApi();
});
afterAll(async () => {
  await api.close();
});
beforeEach(() => {
  api.reset();
});

// ---------------------------------------------------------------------------------------------
// helpers

// any: the answers of four vendor protocols are probed field by field, and each assertion
// checks the shape it reads.
type Any = any;

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${api.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

interface SseEvent {
  event?: string;
  data: string;
}

function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    const ev: SseEvent = { data: '' };
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) ev.event = line.slice(7);
      else if (line.startsWith('data: ')) ev.data += line.slice(6);
    }
    out.push(ev);
  }
  return out;
}

const json = (e: SseEvent): Any => JSON.parse(e.data);
const last = (): RecordedRequest => {
  const r = api.requests.at(-1);
  if (!r) throw new Error('no request recorded');
  return r;
};

// Request bodies in each protocol, with a prompt.
const anthropic = (prompt: string, stream = true): Any => ({
  model: 'claude-x',
  max_tokens: 100,
  stream,
  messages: [{ role: 'user', content: prompt }],
});
const responses = (prompt: string, stream = true): Any => ({
  model: 'gpt-5.5',
  stream,
  input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: prompt }] }],
});
const chat = (prompt: string, stream = false, extra: Any = {}): Any => ({
  model: 'gpt-x',
  stream,
  messages: [{ role: 'user', content: prompt }],
  ...extra,
});
const gemini = (prompt: string): Any => ({ contents: [{ role: 'user', parts: [{ text: prompt }] }] });

const PATHS = {
  anthropic: '/v1/messages?beta=true',
  responses: '/v1/responses',
  chat: '/v1/chat/completions',
  gemini: '/v1beta/models/gemini-x:generateContent',
} as const;
type Proto = keyof typeof PATHS;
const BODIES: Record<Proto, (p: string) => Any> = {
  anthropic: (p) => anthropic(p, false),
  responses: (p) => responses(p, false),
  chat: (p) => chat(p, false),
  gemini,
};

/** The answer's text from a non-stream body of each protocol. */
function textOf(proto: Proto, body: Any): unknown {
  switch (proto) {
    case 'anthropic':
      return body.content.map((b: Any) => b.text).join('');
    case 'responses':
      return body.output[0].content.map((c: Any) => c.text).join('');
    case 'chat':
      return body.choices[0].message.content;
    case 'gemini':
      return body.candidates[0].content.parts.map((p: Any) => p.text).join('');
  }
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages

describe('Anthropic Messages', () => {
  test('stream: the exact event sequence of fake-api.md, the reply, usage 12/7', async () => {
    const res = await post('/v1/messages?beta=true', anthropic('hello there'));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = parseSse(await res.text());
    expect(events.map((e) => e.event)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const start = json(events[0]!);
    expect(start.message).toMatchObject({
      role: 'assistant',
      content: [],
      usage: { input_tokens: 12, cache_read_input_tokens: 0 },
    });
    expect(json(events[2]!).delta).toEqual({ type: 'text_delta', text: 'FAKE REPLY (turn 1): hello there' });
    expect(json(events[4]!)).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 7 } });
    const r = last();
    expect(r).toMatchObject({
      method: 'POST',
      path: '/v1/messages',
      query: { beta: 'true' },
      protocol: 'anthropic',
      prompt: 'hello there',
      turn: 1,
      stream: true,
      model: 'claude-x',
      outcome: 'reply',
      status: 200,
    });
    expect(r.body).toMatchObject({ model: 'claude-x' });
  });

  test('non-stream: one JSON message', async () => {
    const res = await post('/v1/messages', anthropic('plain json', false));
    const body: Any = await res.json();
    expect(body).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: 'FAKE REPLY (turn 1): plain json' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 12, output_tokens: 7, cache_read_input_tokens: 0 },
    });
  });

  test("claude's shape: reminder blocks, a trailing system-role message, a resumed conversation", async () => {
    const body = {
      model: 'claude-x',
      stream: false,
      system: [{ type: 'text', text: 'You are Claude Code.' }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: '<system-reminder>\nnoise\n</system-reminder>\n' },
            { type: 'text', text: 'first question\n' },
          ],
        },
        { role: 'assistant', content: [{ type: 'text', text: 'FAKE REPLY (turn 1): first question' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: '<system-reminder>x</system-reminder>' },
            { type: 'text', text: 'second question [[fake:nothing]]' },
          ],
        },
        { role: 'system', content: 'APPENDED SYSTEM TEXT' },
      ],
    };
    const res = await post('/v1/messages', body);
    const reply: Any = await res.json();
    expect(reply.content[0].text).toBe('FAKE REPLY (turn 2): second question [[fake:nothing]]');
    const r = last();
    expect(r.turn).toBe(2);
    expect(r.prompt).toBe('second question [[fake:nothing]]');
    expect(r.lastUserText).toContain('<system-reminder>x</system-reminder>');
    expect(r.system).toContain('You are Claude Code.');
    expect(r.system).toContain('APPENDED SYSTEM TEXT');
  });

  test('the reply quotes only the first 200 characters of the prompt', async () => {
    const long = 'x'.repeat(250);
    const reply: Any = await (await post('/v1/messages', anthropic(long, false))).json();
    expect(reply.content[0].text).toBe(`FAKE REPLY (turn 1): ${'x'.repeat(200)}`);
  });

  test('tool: a Bash tool_use, then TOOL_RESULT for the follow-up that carries the result', async () => {
    const prompt = 'please [[fake:tool:echo hi > f.txt]]';
    const res = await post('/v1/messages', { ...anthropic(prompt), tools: [{ name: 'Read' }, { name: 'Bash' }] });
    const events = parseSse(await res.text());
    const start = json(events[1]!);
    expect(start.content_block).toMatchObject({ type: 'tool_use', name: 'Bash', input: {} });
    const delta = json(events[2]!).delta;
    expect(delta.type).toBe('input_json_delta');
    expect(JSON.parse(delta.partial_json)).toMatchObject({ command: 'echo hi > f.txt' });
    expect(json(events[4]!).delta.stop_reason).toBe('tool_use');
    expect(last()).toMatchObject({ outcome: 'tool', tools: ['Read', 'Bash'] });

    const toolId = start.content_block.id;
    const follow = {
      model: 'claude-x',
      stream: true,
      messages: [
        { role: 'user', content: prompt },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: toolId, name: 'Bash', input: { command: 'echo hi > f.txt' } }],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: toolId, content: 'tool-ran', is_error: false }] },
      ],
    };
    const events2 = parseSse(await (await post('/v1/messages', follow)).text());
    expect(json(events2[2]!).delta.text).toBe('TOOL_RESULT: tool-ran');
    expect(last()).toMatchObject({ outcome: 'tool-result', toolResult: 'tool-ran', turn: 1, prompt: '' });
  });

  test('errors in the Anthropic shape; 401 says x-should-retry: false', async () => {
    const res = await post('/v1/messages', anthropic('[[fake:401]]'));
    expect(res.status).toBe(401);
    expect(res.headers.get('x-should-retry')).toBe('false');
    expect(await res.json()).toMatchObject({
      type: 'error',
      error: { type: 'authentication_error', message: 'fake error 401' },
    });
    const res500 = await post('/v1/messages', anthropic('[[fake:500]]'));
    expect(res500.status).toBe(500);
    expect(await res500.json()).toMatchObject({ type: 'error', error: { type: 'api_error' } });
  });

  test('empty: no content block; malformed: a stream that breaks off', async () => {
    const events = parseSse(await (await post('/v1/messages', anthropic('[[fake:empty]]'))).text());
    expect(events.map((e) => e.event)).toEqual(['message_start', 'message_delta', 'message_stop']);
    const nonStream: Any = await (await post('/v1/messages', anthropic('[[fake:empty]]', false))).json();
    expect(nonStream.content).toEqual([]);
    const broken = parseSse(await (await post('/v1/messages', anthropic('[[fake:malformed]]'))).text());
    expect(() => broken.forEach(json)).toThrow(SyntaxError);
  });
});

// ---------------------------------------------------------------------------------------------
// OpenAI Responses

describe('OpenAI Responses', () => {
  test("stream: codex's request shape, output_item.done + response.completed", async () => {
    const body = {
      model: 'gpt-5.5',
      stream: true,
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex.' }] },
        {
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: '<environment_context>\n  <cwd>/x</cwd>\n</environment_context>' }],
        },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello codex\n' }] },
      ],
      tools: [{ type: 'function', name: 'exec_command' }],
    };
    const res = await post('/v1/responses', body);
    expect(res.status).toBe(200);
    const events = parseSse(await res.text());
    const names = events.map((e) => e.event);
    expect(names).toContain('response.output_item.done');
    expect(names.at(-1)).toBe('response.completed');
    const done = json(events.find((e) => e.event === 'response.output_item.done')!);
    expect(done.item).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'output_text', text: 'FAKE REPLY (turn 1): hello codex' }],
    });
    const completed = json(events.at(-1)!);
    expect(completed.response.usage).toMatchObject({
      input_tokens: 12,
      output_tokens: 7,
      input_tokens_details: { cached_tokens: 0 },
      total_tokens: 19,
    });
    expect(last()).toMatchObject({
      protocol: 'responses',
      turn: 1,
      prompt: 'hello codex',
      system: 'You are Codex.',
      tools: ['exec_command'],
    });
  });

  test('non-stream, and a string input', async () => {
    const res = await post('/v1/responses', { model: 'm', input: 'just a string' });
    const body: Any = await res.json();
    expect(body).toMatchObject({
      object: 'response',
      status: 'completed',
      output_text: 'FAKE REPLY (turn 1): just a string',
    });
  });

  test('a resumed thread counts its user turns', async () => {
    const body = responses('third');
    body.input = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'first' }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'a' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'second' }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'b' }] },
      ...body.input,
    ];
    const events = parseSse(await (await post('/v1/responses', body)).text());
    const done = json(events.find((e) => e.event === 'response.output_item.done')!);
    expect(done.item.content[0].text).toBe('FAKE REPLY (turn 3): third');
  });

  test("tool: an exec_command function_call (codex 0.169's shell tool), then TOOL_RESULT", async () => {
    const prompt = 'run [[fake:tool:touch made.txt]]';
    const body = {
      ...responses(prompt),
      tools: [
        { type: 'function', name: 'exec_command' },
        { type: 'function', name: 'apply_patch' },
      ],
    };
    const events = parseSse(await (await post('/v1/responses', body)).text());
    const done = json(events.find((e) => e.event === 'response.output_item.done')!);
    expect(done.item).toMatchObject({ type: 'function_call', name: 'exec_command' });
    expect(JSON.parse(done.item.arguments)).toEqual({ cmd: 'touch made.txt' });

    const follow = {
      ...body,
      input: [
        ...body.input,
        done.item,
        {
          type: 'function_call_output',
          call_id: done.item.call_id,
          output: 'Process exited with code 0\nOutput:\nok\n',
        },
      ],
    };
    const events2 = parseSse(await (await post('/v1/responses', follow)).text());
    const done2 = json(events2.find((e) => e.event === 'response.output_item.done')!);
    expect(done2.item.content[0].text).toBe('TOOL_RESULT: Process exited with code 0\nOutput:\nok\n');
    expect(last().outcome).toBe('tool-result');
  });

  test('tool for a client with the older `shell` tool: argv form', async () => {
    const body = { ...responses('[[fake:tool:ls -la]]'), tools: [{ type: 'function', name: 'shell' }] };
    const events = parseSse(await (await post('/v1/responses', body)).text());
    const done = json(events.find((e) => e.event === 'response.output_item.done')!);
    expect(JSON.parse(done.item.arguments)).toEqual({ command: ['bash', '-lc', 'ls -la'] });
  });

  test('errors in the OpenAI shape; malformed stream has no response.completed', async () => {
    const res = await post('/v1/responses', responses('[[fake:401]]'));
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: { message: 'fake error 401', code: 'invalid_api_key' } });
    const broken = parseSse(await (await post('/v1/responses', responses('[[fake:malformed]]'))).text());
    expect(broken.map((e) => e.event)).not.toContain('response.completed');
    const empty = parseSse(await (await post('/v1/responses', responses('[[fake:empty]]'))).text());
    const done = json(empty.find((e) => e.event === 'response.output_item.done')!);
    expect(done.item.content).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions

describe('OpenAI Chat Completions', () => {
  test('non-stream: chat.completion with usage', async () => {
    const res = await post('/v1/chat/completions', {
      ...chat('hi chat'),
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi chat' },
      ],
    });
    const body: Any = await res.json();
    expect(body).toMatchObject({
      object: 'chat.completion',
      choices: [
        { index: 0, message: { role: 'assistant', content: 'FAKE REPLY (turn 1): hi chat' }, finish_reason: 'stop' },
      ],
      usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19, prompt_tokens_details: { cached_tokens: 0 } },
    });
    expect(last()).toMatchObject({ protocol: 'chat', system: 'be brief', prompt: 'hi chat', stream: false });
  });

  test('stream with include_usage: chunks, a usage chunk with empty choices, [DONE]', async () => {
    const res = await post(
      '/v1/chat/completions',
      chat('stream me', true, { stream_options: { include_usage: true } }),
    );
    const events = parseSse(await res.text());
    expect(events.at(-1)!.data).toBe('[DONE]');
    const chunks = events.slice(0, -1).map(json);
    expect(chunks.every((c: Any) => c.object === 'chat.completion.chunk')).toBe(true);
    const text = chunks.map((c: Any) => c.choices[0]?.delta?.content ?? '').join('');
    expect(text).toBe('FAKE REPLY (turn 1): stream me');
    expect(chunks.at(-2).choices[0].finish_reason).toBe('stop');
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 12, completion_tokens: 7 } });
  });

  test('stream without include_usage: usage rides on the finish chunk', async () => {
    const events = parseSse(await (await post('/v1/chat/completions', chat('no usage chunk', true))).text());
    const chunks = events.slice(0, -1).map(json);
    expect(chunks.at(-1)).toMatchObject({ choices: [{ finish_reason: 'stop' }], usage: { prompt_tokens: 12 } });
  });

  test("copilot's shape: <current_datetime> wrapper, a resumed conversation", async () => {
    const messages = [
      { role: 'system', content: 'You are the GitHub Copilot CLI' },
      { role: 'user', content: '<current_datetime>2026-01-01</current_datetime>\n\nfirst' },
      { role: 'assistant', content: 'FAKE REPLY (turn 1): first' },
      { role: 'user', content: '<current_datetime>2026-01-01</current_datetime>\n\nsecond' },
    ];
    const body: Any = await (await post('/v1/chat/completions', { model: 'gpt-5.4', messages })).json();
    expect(body.choices[0].message.content).toBe('FAKE REPLY (turn 2): second');
  });

  test('mistral-chunks: message.content is an array of text chunks (stream too)', async () => {
    const body: Any = await (await post('/v1/chat/completions', chat('[[fake:mistral-chunks]] hi'))).json();
    expect(body.choices[0].message.content).toEqual([
      { type: 'text', text: 'FAKE REPLY (turn 1): [[fake:mistral-chunks]] hi' },
    ]);
    const events = parseSse(await (await post('/v1/chat/completions', chat('[[fake:mistral-chunks]] s', true))).text());
    const deltas = events
      .slice(0, -1)
      .map(json)
      .map((c: Any) => c.choices[0]?.delta?.content);
    expect(deltas).toContainEqual([{ type: 'text', text: 'FAKE REPLY (turn 1): [[fake:mistral-chunks]] s' }]);
  });

  test('tool: a bash tool call as copilot expects, then TOOL_RESULT from the tool message', async () => {
    const prompt = '[[fake:tool:touch x && echo wrote]]';
    const tools = [
      { type: 'function', function: { name: 'bash' } },
      { type: 'custom', custom: { name: 'apply_patch' } },
    ];
    const res = await post(
      '/v1/chat/completions',
      chat(prompt, true, { tools, stream_options: { include_usage: true } }),
    );
    const chunks = parseSse(await res.text())
      .slice(0, -1)
      .map(json);
    const calls = chunks.flatMap((c: Any) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'bash' } });
    const args = calls.map((c: Any) => c.function.arguments).join('');
    expect(JSON.parse(args)).toMatchObject({ command: 'touch x && echo wrote', description: 'fake tool call' });
    expect(chunks.find((c: Any) => c.choices[0]?.finish_reason)?.choices[0].finish_reason).toBe('tool_calls');
    expect(last().tools).toEqual(['bash', 'apply_patch']);

    const nonStream: Any = await (await post('/v1/chat/completions', chat(prompt, false, { tools }))).json();
    const call = nonStream.choices[0].message.tool_calls[0];
    expect(nonStream.choices[0].finish_reason).toBe('tool_calls');

    const follow = {
      model: 'gpt-x',
      messages: [
        { role: 'user', content: prompt },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: 'wrote\n<shellId: 0 completed with exit code 0>' },
      ],
    };
    const reply: Any = await (await post('/v1/chat/completions', follow)).json();
    expect(reply.choices[0].message.content).toBe('TOOL_RESULT: wrote\n<shellId: 0 completed with exit code 0>');
  });

  test('the Mistral user agent gets a Mistral-shaped error body', async () => {
    const res = await post('/v1/chat/completions', chat('[[fake:401]]'), {
      'user-agent': 'speakeasy-sdk/typescript 2.7.0 @mistralai/mistralai',
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ object: 'error', message: 'fake error 401' });
  });
});

// ---------------------------------------------------------------------------------------------
// Gemini

describe('Gemini', () => {
  test('generateContent: candidates and usageMetadata', async () => {
    const res = await post(
      '/v1beta/models/gemini-x:generateContent',
      {
        ...gemini('hi gemini'),
        systemInstruction: { parts: [{ text: 'be brief' }] },
      },
      { 'x-goog-api-key': 'k' },
    );
    const body: Any = await res.json();
    expect(body).toMatchObject({
      candidates: [
        { content: { role: 'model', parts: [{ text: 'FAKE REPLY (turn 1): hi gemini' }] }, finishReason: 'STOP' },
      ],
      usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 7, thoughtsTokenCount: 0, totalTokenCount: 19 },
    });
    expect(last()).toMatchObject({ protocol: 'gemini', model: 'gemini-x', system: 'be brief', stream: false });
  });

  test('streamGenerateContent?alt=sse: data lines, usage on the last', async () => {
    const res = await post('/v1beta/models/gemini-x:streamGenerateContent?alt=sse', gemini('stream gemini'));
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const chunks = parseSse(await res.text()).map(json);
    const text = chunks.map((c: Any) => c.candidates[0].content.parts.map((p: Any) => p.text).join('')).join('');
    expect(text).toBe('FAKE REPLY (turn 1): stream gemini');
    expect(chunks.at(-1)).toMatchObject({
      candidates: [{ finishReason: 'STOP' }],
      usageMetadata: { candidatesTokenCount: 7 },
    });
    expect(last()).toMatchObject({ stream: true, query: { alt: 'sse' } });
  });

  test('errors in the Google shape; tool as functionCall, then functionResponse', async () => {
    const res = await post(PATHS.gemini, gemini('[[fake:401]]'));
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: { code: 401, message: 'fake error 401', status: 'UNAUTHENTICATED' } });
    const call: Any = await (await post(PATHS.gemini, gemini('[[fake:tool:ls]]'))).json();
    expect(call.candidates[0].content.parts[0]).toEqual({ functionCall: { name: 'bash', args: { command: 'ls' } } });
    const follow = {
      contents: [
        { role: 'user', parts: [{ text: '[[fake:tool:ls]]' }] },
        { role: 'model', parts: [call.candidates[0].content.parts[0]] },
        { role: 'user', parts: [{ functionResponse: { name: 'bash', response: { output: 'a.txt' } } }] },
      ],
    };
    const reply: Any = await (await post(PATHS.gemini, follow)).json();
    expect(reply.candidates[0].content.parts[0].text).toBe('TOOL_RESULT: a.txt');
  });

  // What Gemini CLI 0.61.0 sends (test/fakes/fake-api.md, "Gemini CLI").
  const tools = (...names: string[]): Any => ({ tools: [{ functionDeclarations: names.map((name) => ({ name })) }] });
  const cliPrompt = (prompt: string): Any => ({
    contents: [
      {
        role: 'user',
        parts: [{ text: '<session_context>\nThis is the Gemini CLI.\n</session_context>' }, { text: prompt }],
      },
    ],
  });

  test('Gemini CLI: its <session_context> is no part of the prompt, nor a turn of its own', async () => {
    const routerShaped = {
      contents: [
        { role: 'user', parts: [{ text: '<session_context>\nfolders\n</session_context>' }] },
        { role: 'user', parts: [{ text: 'the task' }] },
      ],
    };
    const body: Any = await (await post(PATHS.gemini, routerShaped)).json();
    expect(body.candidates[0].content.parts[0].text).toBe('FAKE REPLY (turn 1): the task');
    await post(PATHS.gemini, cliPrompt('again'));
    expect(last()).toMatchObject({ prompt: 'again', turn: 1 });
  });

  test('JSON mode (its model router, its summaries): an answer of the schema asked for, whatever the directive', async () => {
    const schema = {
      type: 'OBJECT',
      properties: {
        complexity_reasoning: { type: 'STRING' },
        complexity_score: { type: 'INTEGER' },
        tags: { type: 'ARRAY', items: { type: 'STRING', enum: ['a', 'b'] } },
      },
    };
    const res = await post(PATHS.gemini, {
      ...gemini('[[fake:401]] route me'),
      generationConfig: { responseMimeType: 'application/json', responseJsonSchema: schema },
    });
    expect(res.status).toBe(200);
    const body: Any = await res.json();
    expect(JSON.parse(body.candidates[0].content.parts[0].text)).toEqual({
      complexity_reasoning: 'fake',
      complexity_score: 1,
      tags: ['a'],
    });
    expect(last().outcome).toBe('json');
  });

  test('countTokens, GET models and GET models/{model}', async () => {
    const count = await post('/v1beta/models/gemini-x:countTokens', gemini('count me'));
    expect(count.status).toBe(200);
    const counted: Any = await count.json();
    expect(counted.totalTokens).toBeGreaterThan(0);
    expect(last()).toMatchObject({ outcome: 'count-tokens', model: 'gemini-x' });
    const list: Any = await (await fetch(`${api.url}/v1beta/models`)).json();
    expect(list.models[0]).toMatchObject({
      name: 'models/fake-model',
      supportedGenerationMethods: ['generateContent', 'countTokens'],
    });
    const one = await fetch(`${api.url}/v1beta/models/gemini-x`);
    expect(one.status).toBe(200);
    expect(await one.json()).toMatchObject({ name: 'models/gemini-x' });
  });

  test('Gemini CLI: [[fake:tool:…]] calls run_shell_command, [[fake:write:PATH=CONTENT]] write_file', async () => {
    const shell: Any = await (
      await post(PATHS.gemini, { ...cliPrompt('[[fake:tool:echo a=b]]'), ...tools('read_file', 'run_shell_command') })
    ).json();
    expect(shell.candidates[0].content.parts[0].functionCall).toEqual({
      name: 'run_shell_command',
      args: { command: 'echo a=b', description: 'fake tool call' },
    });
    const write: Any = await (
      await post(PATHS.gemini, {
        ...cliPrompt('[[fake:write:notes/a.txt=x = y]]'),
        ...tools('read_file', 'write_file'),
      })
    ).json();
    expect(write.candidates[0].content.parts[0].functionCall).toEqual({
      name: 'write_file',
      args: { file_path: 'notes/a.txt', content: 'x = y' },
    });
    expect(last().outcome).toBe('write');
    // Its default mode offers no write_file: the answer says so, and what it saw.
    const refused: Any = await (
      await post(PATHS.gemini, { ...cliPrompt('[[fake:write:a.txt=x]]'), ...tools('read_file', 'glob') })
    ).json();
    expect(refused.candidates[0].content.parts[0].text).toBe(
      'FAKE WRITE ERROR: the request offers no write_file tool; tools seen: read_file, glob',
    );
    expect(last().outcome).toBe('write-missing');
    const mcp: Any = await (
      await post(PATHS.gemini, {
        ...cliPrompt('[[fake:mcp:parent:ask_parent:{"question":"q?"}]]'),
        ...tools('read_file', 'mcp_parent_ask_parent'),
      })
    ).json();
    expect(mcp.candidates[0].content.parts[0].functionCall).toEqual({
      name: 'mcp_parent_ask_parent',
      args: { question: 'q?' },
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Directives on every protocol

describe.each(Object.keys(PATHS) as Proto[])('directives over %s', (proto) => {
  const path = PATHS[proto];
  const body = BODIES[proto];

  test('401, 500 and 429 (retry-after: 2, every time)', async () => {
    expect((await post(path, body('[[fake:401]]'))).status).toBe(401);
    expect((await post(path, body('[[fake:500]]'))).status).toBe(500);
    for (let i = 0; i < 2; i++) {
      const res = await post(path, body('[[fake:429]]'));
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(JSON.stringify(await res.json())).toContain('fake error 429');
    }
    expect(api.requests.map((r) => r.status)).toEqual([401, 500, 429, 429]);
  });

  test('429-once: 429 with retry-after: 1 for a new prompt, then success; reset() forgets', async () => {
    const prompt = `[[fake:429-once]] ${proto}`;
    const first = await post(path, body(prompt));
    expect(first.status).toBe(429);
    expect(first.headers.get('retry-after')).toBe('1');
    await first.text();
    const second = await post(path, body(prompt));
    expect(second.status).toBe(200);
    expect(textOf(proto, await second.json())).toBe(`FAKE REPLY (turn 1): ${prompt}`);
    expect((await post(path, body(`${prompt} other`))).status).toBe(429);
    api.reset();
    expect((await post(path, body(prompt))).status).toBe(429);
  });

  test('malformed: 200 with a body that is not JSON', async () => {
    const res = await post(path, body('[[fake:malformed]]'));
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(() => JSON.parse(text)).toThrow(SyntaxError);
  });

  test('empty: 200 with no text, usage still reported', async () => {
    const res = await post(path, body('[[fake:empty]]'));
    expect(res.status).toBe(200);
    const b: Any = await res.json();
    expect(textOf(proto, b) || '').toBe('');
    expect(JSON.stringify(b)).toMatch(/12/);
  });

  test('slow: the request is answered after the wait; a client that leaves aborts it', async () => {
    const ok = await post(path, body('[[fake:slow:50]] wait a bit'));
    expect(ok.status).toBe(200);
    expect(textOf(proto, await ok.json())).toBe('FAKE REPLY (turn 1): [[fake:slow:50]] wait a bit');
    expect(last().outcome).toBe('slow');

    const ac = new AbortController();
    const pending = fetch(`${api.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body('[[fake:slow:60000]] never')),
      signal: ac.signal,
    });
    await expect.poll(() => api.requests.length).toBe(2);
    ac.abort();
    await expect(pending).rejects.toThrow();
    await expect.poll(() => last().outcome).toBe('slow-aborted');
  });
});

// ---------------------------------------------------------------------------------------------
// [[fake:mcp:SERVER:TOOL:{args}]]: a tool of an MCP server, under each client's name for it

describe('[[fake:mcp:...]]', () => {
  const args = { question: 'a: b ]] {c} [[d]]', options: [['x'], ['y']] };
  const directive = `ask [[fake:mcp:parent:ask_parent:${JSON.stringify(args)}]] please`;

  test('claude: ToolSearch for the deferred tool, then the tool, then TOOL_RESULT', async () => {
    const deferred = { role: 'system', content: 'deferred tools via ToolSearch:\nWebFetch\nmcp__parent__ask_parent' };
    const prompt = { role: 'user', content: [{ type: 'text', text: directive }] };
    const first = {
      ...anthropic(''),
      stream: false,
      messages: [prompt, deferred],
      tools: [{ name: 'Bash' }, { name: 'ToolSearch' }],
    };
    const search: Any = await (await post(PATHS.anthropic, first)).json();
    expect(search.content).toEqual([
      {
        type: 'tool_use',
        id: expect.any(String),
        name: 'ToolSearch',
        input: { query: 'select:mcp__parent__ask_parent' },
      },
    ]);
    expect(search.stop_reason).toBe('tool_use');
    expect(last().outcome).toBe('mcp-search');

    // claude's follow-up: the search result and a "Tool loaded." text in one user message.
    const loaded = {
      ...first,
      messages: [
        prompt,
        { role: 'assistant', content: search.content },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: search.content[0].id, content: [{ type: 'tool_reference' }] },
            { type: 'text', text: 'Tool loaded.' },
          ],
        },
        deferred,
      ],
      tools: [...first.tools, { name: 'mcp__parent__ask_parent', defer_loading: true }],
    };
    const call: Any = await (await post(PATHS.anthropic, loaded)).json();
    expect(call.content).toEqual([
      { type: 'tool_use', id: expect.any(String), name: 'mcp__parent__ask_parent', input: args },
    ]);
    expect(last()).toMatchObject({ outcome: 'mcp', turn: 1, prompt: '' });

    const answered = {
      ...loaded,
      messages: [
        ...loaded.messages.slice(0, 3),
        { role: 'assistant', content: call.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.content[0].id, content: 'the answer' }] },
      ],
    };
    const reply: Any = await (await post(PATHS.anthropic, answered)).json();
    expect(reply.content).toEqual([{ type: 'text', text: 'TOOL_RESULT: the answer' }]);
    expect(last().outcome).toBe('tool-result');
  });

  const namespaceTool = {
    type: 'namespace',
    name: 'mcp__parent',
    tools: [{ type: 'function', name: 'ask_parent', parameters: {} }],
  };

  test('codex, a model outside its catalog: a function_call in the namespace mcp__parent', async () => {
    const body = { ...responses(directive, false), tools: [{ type: 'function', name: 'exec_command' }, namespaceTool] };
    const call: Any = await (await post(PATHS.responses, body)).json();
    expect(call.output[0]).toMatchObject({ type: 'function_call', name: 'ask_parent', namespace: 'mcp__parent' });
    expect(JSON.parse(call.output[0].arguments)).toEqual(args);
    expect(last().outcome).toBe('mcp');

    const output = { type: 'function_call_output', call_id: call.output[0].call_id, output: 'the answer' };
    const reply: Any = await (
      await post(PATHS.responses, { ...body, input: [...body.input, call.output[0], output] })
    ).json();
    expect(reply.output_text).toBe('TOOL_RESULT: the answer');
  });

  test('codex, gpt-5.5: its built-in tool_search first, then the namespace function it loaded', async () => {
    const body = {
      ...responses(directive, false),
      tools: [{ type: 'function', name: 'exec_command' }, { type: 'tool_search' }],
    };
    const search: Any = await (await post(PATHS.responses, body)).json();
    expect(search.output[0]).toMatchObject({
      type: 'tool_search_call',
      execution: 'client',
      arguments: { query: 'parent ask_parent' },
    });
    expect(last().outcome).toBe('mcp-search');

    const found = {
      type: 'tool_search_output',
      call_id: search.output[0].call_id,
      execution: 'client',
      tools: [namespaceTool],
    };
    const afterSearch = { ...body, input: [...body.input, search.output[0], found] };
    const call: Any = await (await post(PATHS.responses, afterSearch)).json();
    expect(call.output[0]).toMatchObject({ type: 'function_call', name: 'ask_parent', namespace: 'mcp__parent' });
    expect(JSON.parse(call.output[0].arguments)).toEqual(args);

    const output = { type: 'function_call_output', call_id: call.output[0].call_id, output: 'the answer' };
    const answered = { ...afterSearch, input: [...afterSearch.input, call.output[0], output] };
    const reply: Any = await (await post(PATHS.responses, answered)).json();
    expect(reply.output_text).toBe('TOOL_RESULT: the answer');
  });

  test('copilot: the function SERVER-TOOL', async () => {
    const tools = [
      { type: 'function', function: { name: 'bash' } },
      { type: 'function', function: { name: 'parent-ask_parent' } },
    ];
    const call: Any = await (await post(PATHS.chat, chat(directive, false, { tools }))).json();
    expect(call.choices[0].message.tool_calls[0].function.name).toBe('parent-ask_parent');
    expect(JSON.parse(call.choices[0].message.tool_calls[0].function.arguments)).toEqual(args);
    expect(call.choices[0].finish_reason).toBe('tool_calls');
  });

  test('no arguments: {}; a tool the request does not offer: a text naming the tools it saw', async () => {
    const tools = [{ type: 'function', function: { name: 'parent-ping' } }];
    const call: Any = await (await post(PATHS.chat, chat('[[fake:mcp:parent:ping]]', false, { tools }))).json();
    expect(JSON.parse(call.choices[0].message.tool_calls[0].function.arguments)).toEqual({});

    const missing: Any = await (
      await post(
        PATHS.chat,
        chat('[[fake:mcp:other:ask_parent]]', false, {
          tools: [...tools, { type: 'function', function: { name: 'bash' } }],
        }),
      )
    ).json();
    expect(missing.choices[0].message.content).toMatch(
      /^FAKE MCP ERROR: \[\[fake:mcp:other:ask_parent\]\]: the request offers no such tool .*other-ask_parent.*tools seen: parent-ping, bash$/,
    );
    expect(last().outcome).toBe('mcp-missing');
  });

  test('arguments that are not one JSON object are reported, not guessed', async () => {
    for (const [bad, why] of [
      ['[[fake:mcp:parent:ask_parent:{"question": ]]', 'must be one JSON object followed by ]]'],
      ['[[fake:mcp:parent:ask_parent:{"question": 1}} ]]', 'must be one JSON object followed by ]]'],
      ['[[fake:mcp:parent:ask_parent:{"a" 1}]]', 'not JSON'],
      ['[[fake:mcp:parent:ask_parent:["a"]]]', 'must be one JSON object followed by ]]'],
      ['[[fake:mcp:parent]]', 'expected [[fake:mcp:SERVER:TOOL]]'],
    ]) {
      const reply: Any = await (await post(PATHS.chat, chat(bad!, false))).json();
      expect(reply.choices[0].message.content).toContain(why);
      expect(last().outcome).toBe('mcp-error');
    }
  });
});

describe('the server', () => {
  test('usage constants', () => {
    expect(FAKE_USAGE).toEqual({ input: 12, output: 7, cached: 0 });
  });

  test('listens on 127.0.0.1 only; unknown routes are 404; GET /v1/models lists a model', async () => {
    expect(api.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${api.url}/nope`)).status).toBe(404);
    const models: Any = await (await fetch(`${api.url}/v1/models`)).json();
    expect(models.data[0].id).toBe('fake-model');
    expect((await post('/v1/messages', 'not an object')).status).toBe(400);
  });

  test('routes by suffix: a base URL without /v1 still lands', async () => {
    const body: Any = await (await post('/chat/completions', chat('no v1'))).json();
    expect(body.choices[0].message.content).toBe('FAKE REPLY (turn 1): no v1');
  });

  test('gzip request bodies are read', async () => {
    const { gzipSync } = await import('node:zlib');
    const res = await fetch(`${api.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify(chat('zipped'))),
    });
    expect(((await res.json()) as Any).choices[0].message.content).toBe('FAKE REPLY (turn 1): zipped');
  });

  test('close() ends the server and the sockets a slow answer holds', async () => {
    const own = await startFakeModelApi();
    const pending = fetch(`${own.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat('[[fake:slow:600000]] held')),
    });
    const settled = pending.then(
      () => 'resolved',
      () => 'rejected',
    );
    await expect.poll(() => own.requests.length).toBe(1);
    await own.close();
    expect(await settled).toBe('rejected');
    await expect(fetch(`${own.url}/v1/models`)).rejects.toThrow();
  });
});

// ---------------------------------------------------------------------------------------------
// The real SDKs. They are runtime dependencies of the API backends: imported at the top of this
// file, so an install without one fails here rather than skipping.

describe('openai SDK (Grok backend)', () => {
  const client = () => new OpenAI({ apiKey: 'xai-fake', baseURL: `${api.url}/v1`, maxRetries: 0 });

  test('chat.completions: non-stream, stream with usage, 401 as AuthenticationError', async () => {
    const r = await client().chat.completions.create({
      model: 'grok-x',
      messages: [{ role: 'user', content: 'sdk hi' }],
    });
    expect(r.choices[0]!.message.content).toBe('FAKE REPLY (turn 1): sdk hi');
    expect(r.usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 7 });
    expect(last().headers.authorization).toBe('Bearer xai-fake');

    const stream = await client().chat.completions.create({
      model: 'grok-x',
      messages: [{ role: 'user', content: 'sdk stream' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: Any;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('FAKE REPLY (turn 1): sdk stream');
    expect(usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 7 });

    const err = await client()
      .chat.completions.create({ model: 'grok-x', messages: [{ role: 'user', content: '[[fake:401]]' }] })
      .catch((e: Any) => e);
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err.status).toBe(401);
  });

  test('responses API, stream and not', async () => {
    const r = await client().responses.create({ model: 'gpt-5.5', input: 'sdk responses' });
    expect(r.output_text).toBe('FAKE REPLY (turn 1): sdk responses');
    const stream = await client().responses.create({ model: 'gpt-5.5', input: 'sdk responses stream', stream: true });
    const types: string[] = [];
    let final: Any;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.completed') final = ev.response;
    }
    expect(types.at(-1)).toBe('response.completed');
    expect(final.usage).toMatchObject({ input_tokens: 12, output_tokens: 7 });
  });
});

describe('@google/genai SDK (Gemini backend)', () => {
  const client = () => new GoogleGenAI({ apiKey: 'gem-fake', httpOptions: { baseUrl: api.url } });

  test('generateContent, generateContentStream, 401 as ApiError', async () => {
    const r = await client().models.generateContent({
      model: 'gemini-x',
      contents: 'sdk gemini',
      config: { systemInstruction: 'be brief' },
    });
    expect(r.text).toBe('FAKE REPLY (turn 1): sdk gemini');
    expect(r.usageMetadata).toMatchObject({ promptTokenCount: 12, candidatesTokenCount: 7 });
    expect(last()).toMatchObject({ path: '/v1beta/models/gemini-x:generateContent', system: 'be brief' });
    expect(last().headers['x-goog-api-key']).toBe('gem-fake');

    let text = '';
    for await (const chunk of await client().models.generateContentStream({
      model: 'gemini-x',
      contents: 'sdk gemini stream',
    })) {
      text += chunk.text ?? '';
    }
    expect(text).toBe('FAKE REPLY (turn 1): sdk gemini stream');
    expect(last()).toMatchObject({ path: '/v1beta/models/gemini-x:streamGenerateContent', query: { alt: 'sse' } });

    const err = await client()
      .models.generateContent({ model: 'gemini-x', contents: '[[fake:401]]' })
      .catch((e: Any) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(401);
  });
});

describe('@mistralai/mistralai SDK (Mistral backend)', () => {
  const client = () => new Mistral({ apiKey: 'mis-fake', serverURL: api.url });

  test('chat.complete (string and chunk content), chat.stream, 401 as an SDK error', async () => {
    const r = await client().chat.complete({
      model: 'mistral-x',
      messages: [{ role: 'user', content: 'sdk mistral' }],
    });
    expect(r.choices[0]?.message?.content).toBe('FAKE REPLY (turn 1): sdk mistral');
    expect(r.usage).toMatchObject({ promptTokens: 12, completionTokens: 7 });
    expect(last().path).toBe('/v1/chat/completions');
    expect(String(last().headers['user-agent'])).toMatch(/mistral/i);

    const c = await client().chat.complete({
      model: 'mistral-x',
      messages: [{ role: 'user', content: '[[fake:mistral-chunks]] c' }],
    });
    expect(c.choices[0]?.message?.content).toEqual([
      { type: 'text', text: 'FAKE REPLY (turn 1): [[fake:mistral-chunks]] c' },
    ]);

    let text = '';
    let usage: Any;
    for await (const ev of await client().chat.stream({
      model: 'mistral-x',
      messages: [{ role: 'user', content: 'sdk mistral stream' }],
    })) {
      const content = ev.data.choices[0]?.delta?.content;
      if (typeof content === 'string') text += content;
      if (ev.data.usage) usage = ev.data.usage;
    }
    expect(text).toBe('FAKE REPLY (turn 1): sdk mistral stream');
    expect(usage).toMatchObject({ promptTokens: 12, completionTokens: 7 });

    const err = await client()
      .chat.complete({ model: 'mistral-x', messages: [{ role: 'user', content: '[[fake:401]]' }] })
      .catch((e: Any) => e);
    expect(err.statusCode).toBe(401);
  });
});
