// The shared server (serve --http) speaks both eras at one address: a 2026-07-28 request (its
// `_meta` envelope, the Mcp-* headers) is answered by a server built for it alone, a 2025 client
// keeps its session. A spawn made as a task over HTTP is an agent of the one job table: the 2025
// client sees it, and the task outlives the request that made it.
import {
  CreateTaskResultV2Schema,
  GetTaskResultV2Schema,
  UpdateTaskResultV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { dashboardCookie, startHttpServer, type HttpTestServer } from '../helpers/http.js';

const MODERN = '2026-07-28';
let server: HttpTestServer;
let next = 0;

/** A JSON-RPC answer, or the HTTP status that refused the request before any method ran. */
type Answer = { result?: Record<string, unknown>; error?: { code: number; message: string }; status?: number };

/** One 2026 request over HTTP, as the real Claude Code sends it; its JSON-RPC answer (from JSON or SSE). */
async function post(method: string, params: Record<string, unknown>, tasks = true, token = server.token) {
  const id = ++next;
  const name = (params.name ?? params.taskId) as string | undefined;
  const response = await fetch(server.url, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'Mcp-Protocol-Version': MODERN,
      'Mcp-Method': method,
      ...(name ? { 'Mcp-Name': name } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientInfo': { name: 'tasks-http-e2e', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': tasks
            ? { extensions: { 'io.modelcontextprotocol/tasks': {} } }
            : {},
        },
      },
    }),
  });
  const text = await response.text();
  if (response.status === 401) return { status: 401 } as Answer;
  const messages = response.headers.get('content-type')?.startsWith('text/event-stream')
    ? text
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => JSON.parse(line.slice(5)))
    : [JSON.parse(text)];
  const answer = messages.find((m: { id?: number }) => m.id === id);
  if (!answer) throw new Error(`no answer to ${method} (HTTP ${response.status}): ${text.slice(0, 500)}`);
  return answer as Answer;
}

/** tasks/get over HTTP, checked against the extension's schema, until the task leaves `from` (a minute at most). */
async function pollWhile(taskId: string, from: string) {
  const get = async () => GetTaskResultV2Schema.parse((await post('tasks/get', { taskId })).result);
  let task = await get();
  for (const until = Date.now() + 60_000; task.status === from && Date.now() < until; task = await get())
    await new Promise((resolve) => setTimeout(resolve, 100));
  return task;
}

/** The completed task's text. */
function answerOf(task: Awaited<ReturnType<typeof pollWhile>>): string {
  if (task.status !== 'completed') throw new Error(`not completed: ${JSON.stringify(task)}`);
  return (task.result as { structuredContent: { text: string } }).structuredContent.text;
}

beforeAll(async () => {
  server = await startHttpServer();
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

describe('the shared server over HTTP, 2026-07-28', () => {
  test('server/discover names 2026-07-28; a spawn as a task is polled to its end; a 2025 session sees the same agent', async () => {
    const discovered = await post('server/discover', {}, false);
    expect(discovered.result, JSON.stringify(discovered)).toMatchObject({
      supportedVersions: expect.arrayContaining([MODERN]),
    });
    const called = await post('tools/call', {
      name: 'spawn_codex',
      arguments: { prompt: 'over http [[cli:sleep:500]]' },
    });
    const handle = CreateTaskResultV2Schema.parse(called.result);
    const legacy = await server.connect('legacy-client');
    const listed = await legacy.callOk<{ agents: { agent_id: string }[] }>('list');
    expect(listed.agents.map((a) => a.agent_id)).toContain(handle.taskId);
    let task = GetTaskResultV2Schema.parse((await post('tasks/get', { taskId: handle.taskId })).result);
    const until = Date.now() + 60_000;
    while (task.status === 'working' && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, task.pollIntervalMs ?? 1000));
      task = GetTaskResultV2Schema.parse((await post('tasks/get', { taskId: handle.taskId })).result);
    }
    expect(task.status).toBe('completed');
    const viaLegacy = await legacy.callOk('result', { agent_id: handle.taskId });
    if (task.status !== 'completed') return;
    expect((task.result as { structuredContent: unknown }).structuredContent).toEqual(viaLegacy);
  });

  test('a 2026 call without the extension answers as today', async () => {
    const called = await post('tools/call', { name: 'list', arguments: {} }, false);
    expect(called.result).toMatchObject({ resultType: 'complete', structuredContent: { agents: expect.any(Array) } });
  });

  test('a question to the user: the task asks over HTTP; the dashboard answers first; the dialog’s late answer is told; no other token reaches the task', async () => {
    const called = await post('tools/call', {
      name: 'spawn_claude',
      arguments: { prompt: 'over http [[cli:ask:Merge it?]] [[cli:ask-to:user]]' },
    });
    const { taskId } = CreateTaskResultV2Schema.parse(called.result);
    const task = await pollWhile(taskId, 'working');
    if (task.status !== 'input_required') throw new Error(`never asked: ${JSON.stringify(task)}`);
    const key = Object.keys(task.inputRequests)[0]!;
    expect(key).toBe(`${taskId}/q1`);

    // Only the project's token reaches the task: a made-up one is refused before any method runs.
    const stranger = await post(
      'tasks/update',
      { taskId, inputResponses: { [key]: { action: 'decline' } } },
      true,
      'psp_madeup',
    );
    expect(stranger.status).toBe(401);

    const cookie = await dashboardCookie(server);
    const shown = await fetch(`${new URL(server.url).origin}/agents/${taskId}`, { headers: { cookie } });
    expect(await shown.text()).toContain(
      `<b>${taskId}</b> asks the user: <span class="question-text">Merge it?</span>`,
    );
    const page = await fetch(`${new URL(server.url).origin}/agents/${taskId}/reply`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ message_id: 'q1', answer: 'merge it' }).toString(),
    });
    expect(page.status).toBe(303);
    const late = await post('tasks/update', {
      taskId,
      inputResponses: { [key]: { action: 'accept', content: { answer: 'no' } } },
    });
    expect(late.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('answered already, by the dashboard'),
    });
    expect(answerOf(await pollWhile(taskId, 'working'))).toBe('ANSWER merge it');
  });

  test('the dialog answers over HTTP: tasks/update is taken, and the agent gets the answer', async () => {
    const called = await post('tools/call', {
      name: 'spawn_codex',
      arguments: { prompt: '[[cli:ask:Name?]] [[cli:ask-to:user]]' },
    });
    const { taskId } = CreateTaskResultV2Schema.parse(called.result);
    expect((await pollWhile(taskId, 'working')).status).toBe('input_required');
    const updated = await post('tasks/update', {
      taskId,
      inputResponses: { [`${taskId}/q1`]: { action: 'accept', content: { answer: 'Ada' } } },
    });
    UpdateTaskResultV2Schema.parse(updated.result);
    expect(answerOf(await pollWhile(taskId, 'working'))).toBe('ANSWER Ada');
  });
});
