// The HTTP side of MCP (src/mcp/http/) in this process, on 127.0.0.1: the SDK's own client with
// a bearer token, and raw HTTP for what a well-behaved client never sends. Each listener serves
// `echo` (answers with the principal it was opened for) and `block` (returns only when its session
// ends). Waits that must be ended by the listener have long time-outs and must end well before them.
import { once, EventEmitter } from 'node:events';
import { request, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/server';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi, type MockInstance } from 'vitest';
import { z } from 'zod';
import { listenHttpMcp, type HttpMcpListener, type HttpMcpOptions } from '../../src/mcp/http/listener.js';
import { tokenTable } from '../../src/mcp/http/tokens.js';

/** Long enough that only the listener can end these waits in time. */
const NEVER_MS = 120_000;
/** What "ended at once" means here: far under NEVER_MS, far over any scheduling noise. */
const PROMPTLY_MS = 20_000;

const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const call = (id: number, name: string, args: Record<string, unknown> = {}) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
const LIST_TOOLS = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });

const listeners: HttpMcpListener<string>[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(listeners.splice(0).map((l) => l.close()));
});

// Nothing on stdout, ever: the stdio MCP server that hosts the listener speaks JSON-RPC there.
let stdoutWrites: MockInstance;
let consoleLogs: MockInstance[];
beforeAll(() => {
  stdoutWrites = vi.spyOn(process.stdout, 'write');
  consoleLogs = (['log', 'info', 'debug'] as const).map((level) => vi.spyOn(console, level));
});
afterAll(() => {
  expect(stdoutWrites).not.toHaveBeenCalled();
  for (const spy of consoleLogs) expect(spy).not.toHaveBeenCalled();
  vi.restoreAllMocks();
});

/** The tools' events: 'blocked' when `block` starts waiting, 'aborted' when its session ended. */
type ToolEvents = EventEmitter<{
  blocked: [principal: string];
  aborted: [principal: string];
  release: [principal: string];
}>;

function serverFor(principal: string, events: ToolEvents): McpServer {
  const server = new McpServer({ name: 'test-channel', version: '1.0.0' }, { capabilities: { logging: {} } });
  // Notifications on the session's GET stream (none is related to this call), as many as asked.
  server.registerTool(
    'flood',
    { inputSchema: z.object({ count: z.number(), bytes: z.number() }) },
    async ({ count, bytes }) => {
      for (let i = 0; i < count; i++)
        await server.server.notification({
          method: 'notifications/message',
          params: { level: 'info', data: 'x'.repeat(bytes) },
        });
      return { content: [{ type: 'text', text: `${principal}: flooded` }] };
    },
  );
  server.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, ({ text }) => ({
    content: [{ type: 'text', text: `${principal}: ${text}` }],
  }));
  server.registerTool('slow-echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => {
    const released = once(events, 'release');
    events.emit('blocked', principal);
    await released;
    return { content: [{ type: 'text', text: `${principal}: ${text}` }] };
  });
  server.registerTool('block', {}, async (ctx) => {
    events.emit('blocked', principal);
    await new Promise((resolve) => ctx.mcpReq.signal.addEventListener('abort', resolve));
    events.emit('aborted', principal);
    return { content: [{ type: 'text', text: 'aborted' }] };
  });
  return server;
}

async function start(options: Partial<HttpMcpOptions<string>> = {}) {
  const tokens = tokenTable<string>();
  const events: ToolEvents = new EventEmitter();
  const log: string[] = [];
  const listener = await listenHttpMcp<string>({
    authenticate: (token) => tokens.lookup(token),
    serverFor: (principal) => serverFor(principal, events),
    log: (line) => log.push(line),
    ...options,
  });
  listeners.push(listener);
  return { listener, tokens, events, log };
}

async function connectClient(url: string, token: string) {
  const client = new Client({ name: 'test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return { client, sessionId: transport.sessionId!, transport };
}

const echo = async (client: Client, text: string) =>
  ((await client.callTool({ name: 'echo', arguments: { text } })) as { content: { text: string }[] }).content[0]!.text;

type Raw = { status: number; headers: IncomingHttpHeaders; body: string };

/** One request on its own connection; a body given as chunks is sent chunked (no Content-Length). */
function raw(
  url: string,
  {
    method = 'POST',
    headers = {},
    body,
  }: { method?: string; headers?: Record<string, string>; body?: string | string[] },
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    for (const chunk of Array.isArray(body) ? body : []) req.write(chunk);
    req.end(typeof body === 'string' ? body : undefined);
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A session opened with raw requests: initialize, then initialized. */
async function rawSession(url: string, token: string, initialize = INITIALIZE): Promise<string> {
  const opened = await raw(url, { headers: { ...MCP_HEADERS, ...bearer(token) }, body: initialize });
  expect(opened.status).toBe(200);
  const sessionId = opened.headers['mcp-session-id'] as string;
  const initialized = await raw(url, {
    headers: { ...MCP_HEADERS, ...bearer(token), 'mcp-session-id': sessionId },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  expect(initialized.status).toBe(202);
  return sessionId;
}

/** A request whose response stays open: resolves with the response once its headers arrive. */
function openStream(url: string, method: string, headers: Record<string, string>, body?: string) {
  return new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(url, { method, headers, agent: false }, resolve);
    req.on('error', reject);
    req.end(body);
  });
}

/** Everything the response still sends, once it has ended. */
async function rest(res: IncomingMessage): Promise<string> {
  let text = '';
  res.setEncoding('utf8');
  res.on('data', (chunk: string) => (text += chunk));
  await Promise.race([once(res, 'end'), once(res, 'close')]);
  return text;
}

/** The bytes a raw TCP client gets back for what it sends, until the server closes. */
function rawTcp(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('close', () => resolve(text));
    socket.on('error', (error: NodeJS.ErrnoException) => (text ? resolve(text) : reject(error)));
  });
}

const refusal = (code: number, message: string | RegExp) => ({
  jsonrpc: '2.0',
  error: {
    code,
    message: typeof message === 'string' ? expect.stringContaining(message) : expect.stringMatching(message),
  },
  id: null,
});

/** How long until every one of them has settled. */
async function settleAll(works: Promise<unknown>[]): Promise<number> {
  const started = Date.now();
  await Promise.allSettled(works);
  return Date.now() - started;
}

describe('listenHttpMcp', () => {
  test('the SDK client opens a session with its bearer token and calls a tool of the server made for its principal', async () => {
    const { listener, tokens } = await start();
    expect(listener.url).toBe(`http://127.0.0.1:${listener.port}/mcp`);
    const a = await connectClient(listener.url, tokens.issue('run-a'));
    const b = await connectClient(listener.url, tokens.issue('run-b'));
    expect(a.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await a.client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      'block',
      'echo',
      'flood',
      'slow-echo',
    ]);
    expect(await echo(a.client, 'hello')).toBe('run-a: hello');
    expect(await echo(b.client, 'hello')).toBe('run-b: hello');
  });

  test("another principal's token with a session's id gets the same 404 as an unknown id, and the session is untouched", async () => {
    const { listener, tokens, log } = await start();
    const a = await connectClient(listener.url, tokens.issue('run-a'));
    const tokenB = tokens.issue('run-b');
    const asB = (sessionId: string, method: string, body?: string) =>
      raw(listener.url, { method, headers: { ...MCP_HEADERS, ...bearer(tokenB), 'mcp-session-id': sessionId }, body });

    const unknown = await asB('6f2c1c7e-0000-4000-8000-000000000000', 'POST', LIST_TOOLS);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toEqual(refusal(-32001, 'Session not found'));
    for (const [method, body] of [['POST', LIST_TOOLS], ['GET'], ['DELETE']] as const) {
      const stolen = await asB(a.sessionId, method, body);
      expect(stolen.status).toBe(404);
      expect(stolen.body).toBe(unknown.body);
    }
    expect(log.filter((line) => line.includes("another principal's session id"))).toHaveLength(3);
    expect(await echo(a.client, 'still mine')).toBe('run-a: still mine');
  });

  test('no token, a malformed header, an unknown token or a revoked one: the same 401, which names no token', async () => {
    const { listener, tokens, log } = await start();
    const tokenA = tokens.issue('run-a');
    const a = await connectClient(listener.url, tokenA);
    const tokenC = tokens.issue('run-c');
    const c = await rawSession(listener.url, tokenC);
    tokens.revoke('run-c');

    const attempts: Record<string, Record<string, string>> = {
      none: {},
      basic: { authorization: `Basic ${Buffer.from(`x:${tokenA}`).toString('base64')}` },
      empty: { authorization: 'Bearer ' },
      unknown: bearer(`psp_${'A'.repeat(43)}`),
      'almost the token': bearer(`${tokenA.slice(0, -1)}x`),
      revoked: { ...bearer(tokenC), 'mcp-session-id': c },
    };
    const bodies = new Set<string>();
    for (const [name, headers] of Object.entries(attempts)) {
      const res = await raw(listener.url, { headers: { ...MCP_HEADERS, ...headers }, body: LIST_TOOLS });
      expect(res.status, name).toBe(401);
      expect(res.headers['www-authenticate'], name).toBe('Bearer');
      expect(JSON.parse(res.body), name).toEqual(refusal(-32000, 'Authorization: Bearer <token>'));
      bodies.add(res.body);
    }
    expect(bodies.size).toBe(1);
    expect([...bodies][0]).not.toMatch(/psp_/);
    expect(log.filter((line) => line.startsWith('mcp http: 401'))).toHaveLength(Object.keys(attempts).length);
    expect(log.join('\n')).not.toMatch(/psp_/);
    expect(await echo(a.client, 'unaffected')).toBe('run-a: unaffected');
  });

  test('Host and Origin are checked first (403), against the loopback names of the port', async () => {
    const { listener, tokens } = await start();
    const token = tokens.issue('run-a');
    const { port } = listener;
    const post = (headers: Record<string, string>) =>
      raw(listener.url, { headers: { ...MCP_HEADERS, ...headers }, body: INITIALIZE });

    for (const host of ['attacker.example', `attacker.example:${port}`, `127.0.0.1:${port + 1}`, `[::1]:${port}`]) {
      const res = await post({ host }); // no token: the Host check comes before it
      expect(res.status, host).toBe(403);
      expect(JSON.parse(res.body)).toEqual(refusal(-32000, `127.0.0.1:${port}, localhost:${port}`));
    }
    for (const origin of [
      'http://attacker.example',
      `http://127.0.0.1:${port + 1}`,
      `https://localhost:${port}`,
      'null',
    ]) {
      const res = await post({ ...bearer(token), origin });
      expect(res.status, origin).toBe(403);
      expect(JSON.parse(res.body)).toEqual(refusal(-32000, `http://127.0.0.1:${port}, http://localhost:${port}`));
    }
    // The loopback names pass on to the token check, and with the token on to a session.
    expect((await post({ host: `localhost:${port}`, origin: `http://localhost:${port}` })).status).toBe(401);
    expect((await post({ host: `LOCALHOST:${port}`, ...bearer(token) })).status).toBe(200);
    expect((await post({ origin: `http://127.0.0.1:${port}`, ...bearer(token) })).status).toBe(200);
  });

  test('another path gets 404, another method 405, a request out of sequence 400', async () => {
    const { listener, tokens } = await start();
    const token = tokens.issue('run-a');
    const base = `http://127.0.0.1:${listener.port}`;
    for (const path of ['/', '/mcp/', '/mcpx', '/other?x=/mcp']) {
      const res = await raw(base + path, { headers: { ...MCP_HEADERS, ...bearer(token) }, body: INITIALIZE });
      expect(res.status, path).toBe(404);
      expect(JSON.parse(res.body)).toEqual(refusal(-32000, 'MCP is served at /mcp'));
    }
    for (const method of ['PUT', 'PATCH', 'OPTIONS']) {
      const res = await raw(listener.url, { method, headers: bearer(token), body: '' });
      expect(res.status, method).toBe(405);
      expect(res.headers.allow).toBe('GET, POST, DELETE');
      expect(JSON.parse(res.body)).toEqual(refusal(-32000, 'use POST, GET or DELETE'));
    }
    const get = await raw(listener.url, { method: 'GET', headers: { accept: 'text/event-stream', ...bearer(token) } });
    expect(get.status).toBe(400);
    expect(JSON.parse(get.body)).toEqual(refusal(-32000, 'mcp-session-id'));
    const notInitialize = await raw(listener.url, { headers: { ...MCP_HEADERS, ...bearer(token) }, body: LIST_TOOLS });
    expect(notInitialize.status).toBe(400);
    expect(JSON.parse(notInitialize.body)).toEqual(refusal(-32000, 'send an initialize request first'));
  });

  test('a body over the cap gets 413 naming the cap, declared or streamed, and the listener still serves', async () => {
    const { listener, tokens } = await start();
    const token = tokens.issue('run-a');
    const a = await connectClient(listener.url, token);
    const headers = { ...MCP_HEADERS, ...bearer(token), 'mcp-session-id': a.sessionId };
    const big = call(9, 'echo', { text: 'x'.repeat(300 * 1024) });

    const declared = await raw(listener.url, { headers, body: big });
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body)).toEqual(refusal(-32000, 'at most 262144 bytes'));
    const chunks = big.match(/[^]{1,16384}/g)!;
    const streamed = await raw(listener.url, { headers, body: chunks });
    expect(streamed.status).toBe(413);
    // Without a session, too: the cap holds before anyone has one.
    const opening = await raw(listener.url, { headers: { ...MCP_HEADERS, ...bearer(token) }, body: chunks });
    expect(opening.status).toBe(413);

    expect(await echo(a.client, 'x'.repeat(200 * 1024))).toHaveLength('run-a: '.length + 200 * 1024);

    const small = await start({ maxBodyBytes: 1000 });
    const res = await raw(small.listener.url, {
      headers: { ...MCP_HEADERS, ...bearer(small.tokens.issue('run-a')) },
      body: INITIALIZE.padEnd(1001),
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual(refusal(-32000, 'at most 1000 bytes'));
  });

  test('malformed JSON gets 400 with a parse error, and opens or changes nothing', async () => {
    const { listener, tokens } = await start({ maxSessionsPerPrincipal: 1 });
    const token = tokens.issue('run-a');
    for (const body of ['{"jsonrpc":"2.0",', '', 'null x', '\u0000\u00ff']) {
      const res = await raw(listener.url, { headers: { ...MCP_HEADERS, ...bearer(token) }, body });
      expect(res.status, body).toBe(400);
      expect(JSON.parse(res.body)).toEqual(refusal(-32700, 'not valid JSON'));
    }
    // An initialize request that the SDK's transport refuses (it must accept SSE too) opens none either.
    const refused = await raw(listener.url, {
      headers: { ...MCP_HEADERS, ...bearer(token), accept: 'application/json' },
      body: INITIALIZE,
    });
    expect(refused.status).toBe(406);
    // No session was opened by them: the one the limit allows is still free.
    const a = await connectClient(listener.url, token);
    const res = await raw(listener.url, {
      headers: { ...MCP_HEADERS, ...bearer(token), 'mcp-session-id': a.sessionId },
      body: '[{"jsonrpc"',
    });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toEqual(refusal(-32700, 'not valid JSON'));
    expect(await echo(a.client, 'fine')).toBe('run-a: fine');
  });

  test('past maxSessionsPerPrincipal the oldest idle session is ended (404, then a new one opens), never a busy one; 429 only when all are busy', async () => {
    const { listener, tokens, events, log } = await start({ maxSessionsPerPrincipal: 3 });
    const tokenA = tokens.issue('run-a');
    const listTools = (sessionId: string) =>
      raw(listener.url, {
        headers: { ...MCP_HEADERS, ...bearer(tokenA), 'mcp-session-id': sessionId },
        body: LIST_TOOLS,
      });
    // The oldest session is busy: a call in flight. Then two idle ones, the first of them used last.
    const busy = await connectClient(listener.url, tokenA);
    const blocked = once(events, 'blocked');
    const busyCall = busy.client.callTool({ name: 'slow-echo', arguments: { text: 'kept' } }, undefined, {
      timeout: NEVER_MS,
    });
    await blocked;
    const idleUsedLast = await rawSession(listener.url, tokenA);
    const idleOldest = await rawSession(listener.url, tokenA);
    expect((await listTools(idleUsedLast)).status).toBe(200);

    // A fourth client gets in; the idle session used longest ago made room.
    const fourth = await connectClient(listener.url, tokenA);
    expect(await echo(fourth.client, 'in')).toBe('run-a: in');
    const evicted = await listTools(idleOldest);
    expect(evicted.status).toBe(404);
    expect(JSON.parse(evicted.body)).toEqual(refusal(-32001, 'Session not found'));
    // The log names a session by a prefix: the whole id would let whoever reads the log use it.
    expect(log.join('\n')).toContain(`session ${idleOldest.slice(0, 8)}… ended, the oldest idle one`);
    expect(log.join('\n')).not.toContain(idleOldest);
    expect((await listTools(idleUsedLast)).status).toBe(200);

    // The limit is per principal: another's sessions are neither counted nor ended.
    const b = await connectClient(listener.url, tokens.issue('run-b'));
    expect(await echo(b.client, 'mine')).toBe('run-b: mine');

    // All three busy: the next one gets 429, saying what to do; nothing is ended.
    const moreBlocked = new Promise<void>((resolve) => {
      let count = 0;
      events.on('blocked', () => ++count === 2 && resolve());
    });
    const sessionIdOf = idleUsedLast;
    const rawBusy = await openStream(
      listener.url,
      'POST',
      { ...MCP_HEADERS, ...bearer(tokenA), 'mcp-session-id': sessionIdOf },
      call(9, 'slow-echo', { text: 'raw' }),
    );
    const fourthCall = fourth.client.callTool({ name: 'slow-echo', arguments: { text: 'fourth' } }, undefined, {
      timeout: NEVER_MS,
    });
    await moreBlocked;
    const refused = await raw(listener.url, { headers: { ...MCP_HEADERS, ...bearer(tokenA) }, body: INITIALIZE });
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toEqual(
      refusal(-32000, 'holds 3 open sessions, the most it may, each with a request in flight'),
    );

    events.emit('release', 'run-a');
    expect(await rest(rawBusy)).toContain('run-a: raw');
    expect(((await busyCall) as { content: { text: string }[] }).content[0]!.text).toBe('run-a: kept');
    expect(((await fourthCall) as { content: { text: string }[] }).content[0]!.text).toBe('run-a: fourth');
    // Answered, they are idle again: room for one more.
    const fifth = await connectClient(listener.url, tokenA);
    expect(await echo(fifth.client, 'room again')).toBe('run-a: room again');
  });

  test('of the idle sessions, one whose client no longer listens (no stream open) goes first, even if newer', async () => {
    const { listener, tokens } = await start({ maxSessionsPerPrincipal: 2 });
    const token = tokens.issue('run-a');
    const listening = await connectClient(listener.url, token); // holds its GET stream open
    expect(await echo(listening.client, 'first')).toBe('run-a: first');
    const abandoned = await rawSession(listener.url, token);
    const third = await connectClient(listener.url, token);
    expect(await echo(third.client, 'in')).toBe('run-a: in');
    const gone = await raw(listener.url, {
      headers: { ...MCP_HEADERS, ...bearer(token), 'mcp-session-id': abandoned },
      body: LIST_TOOLS,
    });
    expect(gone.status).toBe(404);
    expect(await echo(listening.client, 'still here')).toBe('run-a: still here');
  });

  test('a call the client cancelled leaves its session idle, so it can make room', async () => {
    const { listener, tokens, events } = await start({ maxSessionsPerPrincipal: 1 });
    const token = tokens.issue('run-a');
    const first = await connectClient(listener.url, token);
    const blocked = once(events, 'blocked');
    const cancel = new AbortController();
    const cancelled = first.client.callTool({ name: 'block', arguments: {} }, undefined, { signal: cancel.signal });
    await blocked;
    const aborted = once(events, 'aborted');
    cancel.abort();
    await expect(cancelled).rejects.toThrow();
    await aborted;
    const second = await connectClient(listener.url, token);
    expect(await echo(second.client, 'in')).toBe('run-a: in');
  });

  test("endSessionsOf ends the principal's blocked tool calls and streams at once, and only its own", async () => {
    const { listener, tokens, events } = await start();
    const tokenA = tokens.issue('run-a');
    const a = await connectClient(listener.url, tokenA);
    const b = await connectClient(listener.url, tokens.issue('run-b'));
    const rawA = await rawSession(listener.url, tokenA);
    const headersA = { ...MCP_HEADERS, ...bearer(tokenA), 'mcp-session-id': rawA };

    const blocked = once(events, 'blocked');
    const clientCall = a.client.callTool({ name: 'block', arguments: {} }, undefined, { timeout: NEVER_MS });
    await blocked;
    const rawBlocked = once(events, 'blocked');
    const rawCall = await openStream(listener.url, 'POST', headersA, call(7, 'block'));
    await rawBlocked;
    const getStream = await openStream(listener.url, 'GET', { ...headersA, accept: 'text/event-stream' });
    expect(getStream.statusCode).toBe(200);
    const aborted = new Promise<void>((resolve) => {
      let count = 0;
      events.on('aborted', () => ++count === 2 && resolve());
    });

    tokens.revoke('run-a');
    const rawText = rest(rawCall);
    const ended = settleAll([clientCall, rawText, rest(getStream), aborted]);
    await listener.endSessionsOf('run-a');
    expect(await ended).toBeLessThan(PROMPTLY_MS);
    // The SDK client's call gets an error, rather than waiting for its time-out.
    await expect(clientCall).rejects.toThrow(/the server ended this session/);
    expect(await rawText).toContain('"id":7');
    expect(await rawText).toContain('the server ended this session');

    const after = await raw(listener.url, { headers: headersA, body: LIST_TOOLS });
    expect(after.status).toBe(401);
    expect(await echo(b.client, 'still here')).toBe('run-b: still here');
  });

  test('close() ends open streams and calls, leaves no connection, and nothing answers after', async () => {
    const { listener, tokens, events } = await start();
    const token = tokens.issue('run-a');
    const a = await connectClient(listener.url, token);
    const sessionId = await rawSession(listener.url, token);
    const getStream = await openStream(listener.url, 'GET', {
      ...bearer(token),
      accept: 'text/event-stream',
      'mcp-session-id': sessionId,
    });
    expect(getStream.statusCode).toBe(200);
    const blocked = once(events, 'blocked');
    const clientCall = a.client.callTool({ name: 'block', arguments: {} }, undefined, { timeout: NEVER_MS });
    await blocked;
    // An idle keep-alive connection, too.
    const idle = connect(listener.port, '127.0.0.1');
    await once(idle, 'connect');
    const idleClosed = once(idle, 'close');

    const aborted = once(events, 'aborted');
    const ended = settleAll([listener.close(), rest(getStream), clientCall, idleClosed, aborted]);
    expect(await ended).toBeLessThan(PROMPTLY_MS);
    await expect(clientCall).rejects.toThrow(/the server ended this session/);
    await listener.close(); // twice is fine

    await expect(raw(listener.url, { headers: bearer(token), body: LIST_TOOLS })).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
  });

  test('garbage, huge headers and a connection dropped mid-body get answers or nothing, and the listener serves on', async () => {
    const { listener, tokens, log } = await start();
    const token = tokens.issue('run-a');
    const a = await connectClient(listener.url, token);

    const garbage = await rawTcp(listener.port, 'GARBAGE\r\n\r\n');
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(garbage.slice(garbage.indexOf('\r\n\r\n') + 4))).toEqual(refusal(-32000, 'HPE_'));
    const huge = await rawTcp(
      listener.port,
      `GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:${listener.port}\r\nX-Big: ${'y'.repeat(64 * 1024)}\r\n\r\n`,
    );
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);

    // Headers and the first bytes of a body it said was longer, then gone. "100 Continue" says the
    // request has reached the listener, which is reading its body.
    const dropped = connect(listener.port, '127.0.0.1');
    await once(dropped, 'connect');
    const logged = log.length;
    dropped.write(
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${listener.port}\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
        `Mcp-Session-Id: ${a.sessionId}\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n`,
    );
    const [interim] = (await once(dropped, 'data')) as [Buffer];
    expect(interim.toString()).toMatch(/^HTTP\/1\.1 100 Continue/);
    dropped.write('{"jsonrpc":');
    dropped.destroy();
    await vi.waitFor(() => expect(log.slice(logged).join('\n')).toMatch(/closed the connection before/), {
      timeout: PROMPTLY_MS,
    });

    expect(await echo(a.client, 'still serving')).toBe('run-a: still serving');
    expect(log.join('\n')).not.toContain(token);
  });
});

describe('streams nobody reads', () => {
  test('a GET stream whose client stops reading is cut off once it has taken nothing for stalledStreamMs; the session serves on', async () => {
    const { listener, tokens, log } = await start({ stalledStreamMs: 300 });
    const token = tokens.issue('reader');
    const sessionId = await rawSession(listener.url, token);
    const headers = { ...MCP_HEADERS, ...bearer(token), 'mcp-session-id': sessionId };
    // Opened and never read: no 'data' listener, so the socket stops being read too.
    const stream = await openStream(listener.url, 'GET', { ...headers, accept: 'text/event-stream' });
    expect(stream.statusCode).toBe(200);
    // 64 MB of notifications, far more than the sockets between them hold.
    const flooded = await raw(listener.url, { headers, body: call(3, 'flood', { count: 256, bytes: 256 * 1024 }) });
    expect(flooded.body).toContain('reader: flooded');
    const line = `session ${sessionId.slice(0, 8)}…: a stream its client stopped reading was cut off`;
    const deadline = Date.now() + PROMPTLY_MS;
    while (!log.join('\n').includes(line)) {
      expect(Date.now(), 'the unread stream was never cut off').toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Read now, it ends after what the sockets held: far less than was sent.
    let received = 0;
    stream.on('data', (chunk: Buffer) => (received += chunk.length));
    stream.on('error', () => {});
    await new Promise((resolve) => stream.socket.once('close', resolve));
    expect(received).toBeLessThan(32 * 1024 * 1024);
    const after = await raw(listener.url, { headers, body: call(4, 'echo', { text: 'still here' }) });
    expect(after.body).toContain('reader: still here');
  });
});

describe('idle sessions', () => {
  test('a session with no request and no open stream past idleSessionMs is ended; one with a stream open is kept', async () => {
    const { listener, tokens, log } = await start({ idleSessionMs: 300 });
    const token = tokens.issue('idle');
    const idle = await rawSession(listener.url, token);
    const { client } = await connectClient(listener.url, token); // holds its GET stream open
    const listTools = (sessionId: string) =>
      raw(listener.url, {
        headers: { ...MCP_HEADERS, ...bearer(token), 'mcp-session-id': sessionId },
        body: LIST_TOOLS,
      });
    const deadline = Date.now() + PROMPTLY_MS;
    while ((await listTools(idle)).status !== 404) {
      expect(Date.now(), 'the idle session was never ended').toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(log.join('\n')).toContain('idle for 300 ms: closed');
    expect(log.join('\n')).not.toContain(idle);
    expect(await echo(client, 'still here')).toBe('idle: still here');
  });

  test('resumable streams: a client whose SSE response dropped reconnects with Last-Event-ID and gets what it missed', async () => {
    const { listener, tokens, events } = await start({ resumableStreams: true });
    const token = tokens.issue('job-1');
    // Resumable from the protocol version that primes each stream with an event id (2025-11-25).
    const sessionId = await rawSession(listener.url, token, INITIALIZE.replace('2025-06-18', '2025-11-25'));
    const headers = {
      ...MCP_HEADERS,
      ...bearer(token),
      'mcp-session-id': sessionId,
      'mcp-protocol-version': '2025-11-25',
    };
    // The call's response stream: its first event (the priming event with an id) arrives, then
    // the connection drops while the tool still runs.
    const blocked = once(events, 'blocked');
    const stream = await openStream(listener.url, 'POST', headers, call(7, 'slow-echo', { text: 'after the drop' }));
    const firstId = await new Promise<string>((resolve) => {
      let text = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        text += chunk;
        const id = /^id: (.+)$/m.exec(text)?.[1];
        if (id) resolve(id);
      });
    });
    await blocked;
    stream.destroy();
    events.emit('release', 'job-1');
    // The answer was sent while nobody listened: it comes back on a GET with Last-Event-ID.
    const resumed = await openStream(listener.url, 'GET', {
      ...bearer(token),
      accept: 'text/event-stream',
      'mcp-session-id': sessionId,
      'mcp-protocol-version': '2025-11-25',
      'last-event-id': firstId,
    });
    expect(resumed.statusCode).toBe(200);
    const replay = await new Promise<string>((resolve) => {
      let text = '';
      resumed.setEncoding('utf8');
      resumed.on('data', (chunk: string) => {
        text += chunk;
        if (text.includes('job-1: after the drop')) resolve(text);
      });
    });
    resumed.destroy();
    const answer = JSON.parse(/^data: (.*job-1: after the drop.*)$/m.exec(replay)![1]!);
    expect(answer).toMatchObject({ id: 7, result: { content: [{ text: 'job-1: after the drop' }] } });
  });
});
