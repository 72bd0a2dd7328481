// What polyspawn relies on in the MCP SDK beyond its documented surface (src/mcp/sdk-seam.ts), and
// the SDK behaviours its tasks lean on: each test fails when an SDK upgrade changes one of them.
import { InMemoryTransport, McpServer, type JSONRPCMessage } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { replaceSetLevel, serveCustomMethod } from '../../src/mcp/sdk-seam.js';

const MODERN = '2026-07-28';
const envelope = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'seam', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

/** A raw JSON-RPC peer on one end of an in-memory pair: what a client sends, and what comes back. */
async function rawPeer(serve: (transport: InMemoryTransport) => Promise<unknown> | unknown) {
  const [server, client] = InMemoryTransport.createLinkedPair();
  const received: JSONRPCMessage[] = [];
  const waiting = new Map<number, (m: Record<string, unknown>) => void>();
  client.onmessage = (message) => {
    received.push(message);
    const id = (message as { id?: number }).id;
    if (id !== undefined && waiting.has(id)) waiting.get(id)!(message as Record<string, unknown>);
  };
  await client.start();
  await serve(server);
  let next = 0;
  const request = (method: string, params: Record<string, unknown> = {}) => {
    const id = ++next;
    const answered = new Promise<Record<string, unknown>>((resolve) => waiting.set(id, resolve));
    void client.send({ jsonrpc: '2.0', id, method, params });
    return answered;
  };
  const notify = (method: string, params: Record<string, unknown> = {}) =>
    client.send({ jsonrpc: '2.0', method, params });
  return { request, notify, received, close: () => client.close() };
}

async function legacyPeer(server: McpServer) {
  const peer = await rawPeer((transport) => server.connect(transport));
  await peer.request('initialize', {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'seam', version: '1' },
  });
  await peer.notify('notifications/initialized');
  return peer;
}

describe('replaceSetLevel', () => {
  test("the SDK's logging/setLevel is replaced, and the SDK then sends every logging message it is given", async () => {
    const server = new McpServer({ name: 's', version: '1' }, { capabilities: { logging: {} } });
    const levels: string[] = [];
    replaceSetLevel(server.server, (level) => levels.push(level));
    const peer = await legacyPeer(server);
    expect(await peer.request('logging/setLevel', { level: 'error' })).toMatchObject({ result: {} });
    expect(levels).toEqual(['error']);
    // Below the level the client set: the SDK's own filter (its private map) must not drop it.
    await server.server.sendLoggingMessage({ level: 'debug', data: 'below the level' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(peer.received.some((m) => (m as { method?: string }).method === 'notifications/message')).toBe(true);
    await peer.close();
  });
});

describe('serveCustomMethod and the task handle', () => {
  const params = z.object({ taskId: z.string() });
  const build = () => {
    const server = new McpServer({ name: 's', version: '1' }, { capabilities: { tools: {} } });
    serveCustomMethod(server.server, 'tasks/get', params, async ({ taskId }) => ({ taskId, status: 'working' }));
    // What tasks/update relies on: the request's inputResponses, lifted out of its params by the
    // SDK, reach the handler (and a wrapped entry the SDK drops does not).
    serveCustomMethod(server.server, 'tasks/update', params, async ({ taskId }, { inputResponses }) => ({
      taskId,
      got: inputResponses ?? null,
    }));
    server.server.setRequestHandler(
      'tools/call',
      async () =>
        ({
          resultType: 'task',
          taskId: 'abc',
          status: 'working',
          createdAt: new Date(0).toISOString(),
          lastUpdatedAt: new Date(0).toISOString(),
          ttlMs: 1000,
          pollIntervalMs: 1000,
          // The SDK's types have no task result: the 2026 vocabulary of tools/call lets it through.
        }) as never,
    );
    return server;
  };

  test('on the 2026-07-28 era (serveStdio): the custom method is served, its params checked; a tools/call may answer a task handle', async () => {
    const peer = await rawPeer((transport) => serveStdio(() => build(), { transport }));
    const discovered = await peer.request('server/discover', { _meta: envelope });
    expect(discovered).toHaveProperty('result');
    const got = await peer.request('tasks/get', { taskId: 't1', _meta: envelope });
    expect(got.result).toMatchObject({ taskId: 't1', status: 'working', resultType: 'complete' });
    const bad = await peer.request('tasks/get', { task: 1, _meta: envelope });
    expect(bad.error).toMatchObject({ code: -32602 });
    const responses = {
      'a/q1': { action: 'accept', content: { answer: 'yes' } },
      wrapped: { method: 'x', result: {} },
    };
    const updated = await peer.request('tasks/update', { taskId: 't1', inputResponses: responses, _meta: envelope });
    expect(updated.result).toMatchObject({ taskId: 't1', got: { 'a/q1': responses['a/q1'] } });
    expect(updated.result).not.toHaveProperty('got.wrapped');
    const call = await peer.request('tools/call', { name: 'x', arguments: {}, _meta: envelope });
    expect(call.result).toMatchObject({ resultType: 'task', taskId: 'abc', pollIntervalMs: 1000 });
    await peer.close();
  });

  test('on the 2025 era: the same method answers', async () => {
    const peer = await legacyPeer(build());
    expect((await peer.request('tasks/get', { taskId: 't2' })).result).toMatchObject({ taskId: 't2' });
    const responses = { 'a/q1': { action: 'decline' } };
    expect((await peer.request('tasks/update', { taskId: 't2', inputResponses: responses })).result).toMatchObject({
      got: responses,
    });
    await peer.close();
  });
});

describe('projectCallToolResult', () => {
  test('leaves a result with object structured content and its text as it is (2025 era)', async () => {
    const server = new McpServer({ name: 's', version: '1' });
    const peer = await legacyPeer(server);
    const result = {
      structuredContent: { a: 1 },
      content: [{ type: 'text' as const, text: '{"a":1}' }],
    };
    expect(server.server.projectCallToolResult(result, { type: 'object' })).toEqual(result);
    await peer.close();
  });
});
