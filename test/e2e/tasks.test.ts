// Spawns and teams as MCP tasks (protocol 2026-07-28, extension io.modelcontextprotocol/tasks),
// over raw JSON-RPC on stdio as the real Claude Code sends it (/work/shared/reference/mcp-tasks.md):
// server/discover, then tools/call with the extension declared in the request's envelope. Every
// task message is checked against @modelcontextprotocol/ext-tasks' wire schemas.
import {
  CancelTaskResultV2Schema,
  CreateTaskResultV2Schema,
  GetTaskResultV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { POLL_INTERVAL_MS, TASK_TTL_MS } from '../../src/mcp/tasks.js';
import { startRpcServer, stopAllAndCollectStdoutProblems, type RpcServer } from '../helpers/rpc.js';

const MODERN = '2026-07-28';
const envelope = (tasks: boolean) => ({
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'tasks-e2e', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': tasks ? { extensions: { 'io.modelcontextprotocol/tasks': {} } } : {},
});

let s: RpcServer;

/** A 2026 request: its params carry the envelope. */
const modern = (method: string, params: Record<string, unknown> = {}, tasks = true) =>
  s.request(method, { ...params, _meta: { ...(params._meta as object), ...envelope(tasks) } });

/** A 2026 tools/call without the extension: its structured result. */
const callOk = async <T = Record<string, unknown>>(name: string, args: Record<string, unknown>) => {
  const r = await modern('tools/call', { name, arguments: args }, false);
  const result = r.result as { isError?: boolean; structuredContent: T; content: { text: string }[] };
  if (r.error || result.isError) throw new Error(`${name}: ${JSON.stringify(r.error ?? result.content)}`);
  return result.structuredContent;
};

const callAsTask = async (name: string, args: Record<string, unknown>) => {
  const r = await modern('tools/call', { name, arguments: args });
  expect(r.error).toBeUndefined();
  return CreateTaskResultV2Schema.parse(r.result);
};

const getTask = async (taskId: string) => {
  const r = await modern('tasks/get', { taskId });
  expect(r.error, JSON.stringify(r.error)).toBeUndefined();
  return GetTaskResultV2Schema.parse(r.result);
};

type Task = Awaited<ReturnType<typeof getTask>>;
/** A completed task's result: a tool result, as `result` gives it. */
function resultOf(task: Task) {
  if (task.status !== 'completed') throw new Error(`task ${task.taskId} is ${task.status}, not completed`);
  return task.result as unknown as { structuredContent: Record<string, unknown>; content: { text: string }[] };
}

/** Polls as Claude Code does, at the server's interval, until the task leaves `working`. */
async function untilDone(taskId: string, deadlineMs = 60_000) {
  const seen: string[] = [];
  const until = Date.now() + deadlineMs;
  for (;;) {
    const task = await getTask(taskId);
    seen.push(task.statusMessage ?? '');
    if (task.status !== 'working') return { task, seen };
    if (Date.now() > until) throw new Error(`task ${taskId} still working after ${deadlineMs} ms: ${seen.join(' | ')}`);
    await new Promise((resolve) => setTimeout(resolve, task.pollIntervalMs ?? POLL_INTERVAL_MS));
  }
}

beforeAll(async () => {
  s = await startRpcServer({ initialize: false });
  const discovered = await modern('server/discover', {}, false);
  expect(discovered.error).toBeUndefined();
  expect(discovered.result).toMatchObject({ supportedVersions: expect.arrayContaining([MODERN]) });
}, 60_000);

afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
});

describe('a spawn as a task (2026-07-28, the extension declared)', () => {
  test('the handle comes at once; tasks/get says working, then completed with what `result` gives', async () => {
    const handle = await callAsTask('spawn_codex', { prompt: 'a task [[cli:sleep:1500]]' });
    expect(handle).toMatchObject({ status: 'working', pollIntervalMs: POLL_INTERVAL_MS, ttlMs: TASK_TTL_MS });
    // The task id is the agent id: the other tools take it.
    const listed = await callOk<{ agents: { agent_id: string }[] }>('list', {});
    expect(listed.agents.map((a) => a.agent_id)).toContain(handle.taskId);
    const { task, seen } = await untilDone(handle.taskId);
    expect(seen[0]).toMatch(/queued|running/);
    const result = resultOf(task);
    expect(result.structuredContent).toMatchObject({ agent_id: handle.taskId, state: 'succeeded' });
    expect(result.structuredContent.text).toContain('FAKE codex: a task');
    const viaResult = await callOk('result', { agent_id: handle.taskId });
    expect(result.structuredContent).toEqual(viaResult);
    expect(JSON.parse(result.content[0]!.text)).toEqual(viaResult);
  });

  test('a failing agent ends the task failed, with the reason', async () => {
    const handle = await callAsTask('spawn_claude', { prompt: 'break [[cli:fail]]' });
    const { task } = await untilDone(handle.taskId);
    if (task.status !== 'failed') throw new Error(`task is ${task.status}, not failed`);
    expect(task.error.message).toMatch(new RegExp(`agent ${handle.taskId} failed`));
  });

  test('a time-out ends it failed too', async () => {
    const handle = await callAsTask('spawn_codex', { prompt: 'slow [[cli:sleep:30000]]', timeout_s: 1 });
    const { task } = await untilDone(handle.taskId);
    expect(task).toMatchObject({ status: 'failed', statusMessage: 'timed out' });
  });

  test('tasks/cancel cancels the agent; the task reads cancelled, and so does the agent', async () => {
    const handle = await callAsTask('spawn_codex', { prompt: 'long [[cli:sleep:60000]]' });
    const cancelled = await modern('tasks/cancel', { taskId: handle.taskId });
    expect(cancelled.error).toBeUndefined();
    CancelTaskResultV2Schema.parse(cancelled.result);
    const { task } = await untilDone(handle.taskId, 20_000);
    expect(task.status).toBe('cancelled');
    expect(await callOk('result', { agent_id: handle.taskId })).toMatchObject({
      state: 'cancelled',
    });
  });

  test('a team as a task: run_team answers a handle, and the task completes with the team result', async () => {
    const handle = await callAsTask('run_team', {
      task: 'two views [[cli:sleep:300]]',
      topology: 'map_reduce',
      members: ['codex', 'claude'],
    });
    expect(handle.taskId).toMatch(/^team-/);
    const { task } = await untilDone(handle.taskId);
    expect(task.status).toBe('completed');
    const team = resultOf(task).structuredContent;
    expect(team).toMatchObject({ team_id: handle.taskId, state: 'succeeded' });
  });

  test('an unknown task id is refused (-32602), and so is an update: no task asks for input', async () => {
    const unknown = await modern('tasks/get', { taskId: 'nosuch' });
    expect(unknown.error).toMatchObject({ code: -32602, message: expect.stringContaining('no task "nosuch"') });
    const handle = await callAsTask('spawn_codex', { prompt: 'quick' });
    const update = await modern('tasks/update', { taskId: handle.taskId, inputResponses: {} });
    expect(update.error).toMatchObject({ code: -32602, message: expect.stringContaining('reply_subagent') });
    expect((await untilDone(handle.taskId)).task.status).toBe('completed');
  });
});

describe('calls that do not declare the extension behave as today', () => {
  test('a 2026 call without it gets the agent at once (and with wait_s its result)', async () => {
    const r = await modern('tools/call', { name: 'spawn_codex', arguments: { prompt: 'plain', wait_s: 60 } }, false);
    const result = r.result as { resultType: string; structuredContent: Record<string, unknown> };
    expect(result.resultType).toBe('complete');
    expect(result.structuredContent, JSON.stringify(result)).toMatchObject({ state: 'succeeded' });
    expect(JSON.stringify(result.structuredContent)).toContain('FAKE codex: plain');
  });
});
