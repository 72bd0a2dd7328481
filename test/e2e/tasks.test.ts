// Spawns and teams as MCP tasks (protocol 2026-07-28, extension io.modelcontextprotocol/tasks),
// over raw JSON-RPC on stdio as the real Claude Code sends it (/work/shared/reference/mcp-tasks.md):
// server/discover, then tools/call with the extension declared in the request's envelope. Every
// task message is checked against @modelcontextprotocol/ext-tasks' wire schemas.
import {
  CancelTaskResultV2Schema,
  CreateTaskResultV2Schema,
  GetTaskResultV2Schema,
  UpdateTaskRequestV2Schema,
  UpdateTaskResultV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CONVERSATION_LIMITS, USER_DECLINED } from '../../src/jobs/conversation.js';
import { POLL_INTERVAL_MS, TASK_TTL_MS } from '../../src/mcp/tasks.js';
import { repoRoot } from '../helpers/mcp.js';
import { startRpcServer, stopAllAndCollectStdoutProblems, type RpcServer } from '../helpers/rpc.js';
import { tempDir } from '../helpers/temp.js';

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
  // An ACP agent too (test/fakes/fake-acp-agent.mjs), whose permission requests are questions to the user.
  const config = join(tempDir('tasks-config'), 'config.json');
  const fakeAcp = join(repoRoot, 'test', 'fakes', 'fake-acp-agent.mjs');
  writeFileSync(
    config,
    JSON.stringify({ acp_agents: { fakeacp: { command: process.execPath, args: [fakeAcp], start_timeout_s: 5 } } }),
  );
  s = await startRpcServer({ initialize: false, env: { POLYSPAWN_CONFIG: config } });
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

  test('an unknown task id is refused (-32602), and so is an update of a task that asked nothing', async () => {
    const unknown = await modern('tasks/get', { taskId: 'nosuch' });
    expect(unknown.error).toMatchObject({ code: -32602, message: expect.stringContaining('no task "nosuch"') });
    const unknownUpdate = await modern('tasks/update', { taskId: 'nosuch', inputResponses: { 'x/q1': accept('hi') } });
    expect(unknownUpdate.error).toMatchObject({ code: -32602, message: expect.stringContaining('no task "nosuch"') });
    const handle = await callAsTask('spawn_codex', { prompt: 'quick' });
    const empty = await modern('tasks/update', { taskId: handle.taskId, inputResponses: {} });
    expect(empty.error).toMatchObject({ code: -32602, message: expect.stringContaining('holds no inputResponses') });
    const stray = await modern('tasks/update', {
      taskId: handle.taskId,
      inputResponses: { [`${handle.taskId}/q1`]: accept('hi') },
    });
    expect(stray.error).toMatchObject({ code: -32602, message: expect.stringContaining('asked no such question') });
    expect((await untilDone(handle.taskId)).task.status).toBe('completed');
  });
});

const accept = (answer: unknown) => ({ action: 'accept', content: { answer } });

/** A tasks/update as Claude Code sends it, checked against the extension's request schema; its answer. */
async function update(taskId: string, inputResponses: Record<string, unknown>) {
  const params = { taskId, inputResponses };
  UpdateTaskRequestV2Schema.parse({ jsonrpc: '2.0', id: 1, method: 'tasks/update', params });
  return modern('tasks/update', params);
}

/** Polls until the task asks the user; returns the task and its one input request. */
async function untilAsking(taskId: string) {
  const until = Date.now() + 60_000;
  for (;;) {
    const task = await getTask(taskId);
    if (task.status === 'input_required') {
      const entries = Object.entries(task.inputRequests);
      expect(entries, JSON.stringify(task)).toHaveLength(1);
      const [key, request] = entries[0]!;
      if (request.method !== 'elicitation/create' || request.params.mode === 'url')
        throw new Error(`not a form: ${JSON.stringify(request)}`);
      return { task, key, form: request.params };
    }
    if (task.status !== 'working' || Date.now() > until) throw new Error(`task never asked: ${JSON.stringify(task)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

type Job = {
  agent_id: string;
  questions?: { message_id: string; to?: string }[];
  conversation?: { kind: string; by?: string; text: string }[];
};

describe("an agent's question to the user on a task (input_required, tasks/update)", () => {
  test('the task asks with a form of the question and its options; the choice reaches the agent; a later answer is told who answered', async () => {
    const handle = await callAsTask('spawn_claude', {
      prompt: 'pick [[cli:ask:Which colour?]] [[cli:ask-to:user]] [[cli:ask-options:red|blue]]',
    });
    const { task, key, form } = await untilAsking(handle.taskId);
    expect(key).toBe(`${handle.taskId}/q1`);
    expect(task.statusMessage).toBe("waiting for the user's answer: Which colour?");
    expect(form.message).toBe(`Agent ${handle.taskId} (claude) asks you:\n\nWhich colour?`);
    expect(form.requestedSchema).toEqual({
      type: 'object',
      properties: { answer: { type: 'string', title: 'Your answer', enum: ['red', 'blue'] } },
      required: ['answer'],
    });
    // Where the orchestrator looks, the question is marked as the user's.
    const listed = await callOk<{ agents: Job[] }>('list', {});
    const job = listed.agents.find((a) => a.agent_id === handle.taskId)!;
    expect(job.questions).toMatchObject([{ message_id: 'q1', to: 'user' }]);

    const answered = await update(handle.taskId, { [key]: accept('blue') });
    expect(answered.error, JSON.stringify(answered.error)).toBeUndefined();
    UpdateTaskResultV2Schema.parse(answered.result);
    const { task: done } = await untilDone(handle.taskId);
    expect(resultOf(done).structuredContent.text).toContain('ANSWER blue');
    const result = await callOk<Job>('result', { agent_id: handle.taskId });
    expect(result.conversation).toContainEqual(expect.objectContaining({ kind: 'answer', by: 'user', text: 'blue' }));

    // The first answer won: the others are told by whom.
    const again = await update(handle.taskId, { [key]: accept('red') });
    expect(again.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining("answered already, by the user, in the client's dialog"),
    });
    const late = await modern('tools/call', {
      name: 'reply_subagent',
      arguments: { agent_id: handle.taskId, message_id: 'q1', answer: 'green' },
    });
    expect(JSON.stringify(late.result)).toContain("answered already, by the user, in the client's dialog");
  });

  test('reply_subagent answers first: the task goes back to working; the dialog’s late answer is refused, naming the orchestrator', async () => {
    const handle = await callAsTask('spawn_codex', { prompt: 'q [[cli:ask:Deploy now?]] [[cli:ask-to:user]]' });
    const { key, form } = await untilAsking(handle.taskId);
    expect(form.requestedSchema).toMatchObject({
      properties: { answer: { type: 'string', maxLength: CONVERSATION_LIMITS.answerChars } },
    });
    await callOk('reply_subagent', { agent_id: handle.taskId, message_id: 'q1', answer: 'not yet' });
    const { task } = await untilDone(handle.taskId);
    expect(resultOf(task).structuredContent.text).toContain('ANSWER not yet');
    const late = await update(handle.taskId, { [key]: accept('yes') });
    expect(late.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('answered already, by the orchestrator (reply_subagent)'),
    });
  });

  test('a declined dialog: the agent is told the user declined, and carries on', async () => {
    const handle = await callAsTask('spawn_copilot', {
      prompt: 'q [[cli:ask:Delete the branch?]] [[cli:ask-to:user]]',
    });
    const { key } = await untilAsking(handle.taskId);
    const declined = await update(handle.taskId, { [key]: { action: 'decline' } });
    expect(declined.error).toBeUndefined();
    const { task } = await untilDone(handle.taskId);
    expect(resultOf(task).structuredContent.text).toContain(`ANSWER ${USER_DECLINED}`);
  });

  test('a flood of questions to the user opens one dialog at a time; bad updates are refused and the task still answers', async () => {
    const handle = await callAsTask('spawn_claude', { prompt: 'flood [[cli:ask-many:5]] [[cli:ask-to:user]]' });
    await waitUntilAsked(handle.taskId, 5);
    const first = await untilAsking(handle.taskId);
    // Answers that cannot be given: refused whole, and nothing answered.
    const bad: [Record<string, unknown>, string][] = [
      [{ [first.key]: { action: 'accept', content: {} } }, 'accepted without an answer'],
      [{ [first.key]: accept('x'.repeat(CONVERSATION_LIMITS.answerChars + 1)) }, 'shorten it'],
      [{ [first.key]: { action: 'maybe' } }, 'not an elicitation result'],
      [{ [first.key]: accept('fine'), 'nosuch/q1': accept('fine') }, 'asked no such question'],
      [{ [first.key.replace('/', '')]: accept('fine') }, 'asked no such question'],
    ];
    for (const [inputResponses, said] of bad) {
      const r = await modern('tasks/update', { taskId: handle.taskId, inputResponses });
      expect(r.error, JSON.stringify(inputResponses).slice(0, 100)).toMatchObject({
        code: -32602,
        message: expect.stringContaining(said),
      });
    }
    const seen = [first.key];
    for (let i = 0; i < 4; i++) {
      expect((await update(handle.taskId, { [seen.at(-1)!]: accept(`answer ${i}`) })).error).toBeUndefined();
      const next = await untilAsking(handle.taskId);
      expect(seen).not.toContain(next.key);
      seen.push(next.key);
    }
    expect(new Set(seen).size).toBe(5);
    await modern('tasks/cancel', { taskId: handle.taskId });
    expect((await untilDone(handle.taskId, 20_000)).task.status).toBe('cancelled');
  });

  test('control characters and bidi overrides of a question and its options do not reach the dialog; a choice maps back to the option', async () => {
    const odd = 'Pick \u001b[2J\u001b]0;pwned\u0007 one \u202Eevil';
    const handle = await callAsTask('spawn_claude', {
      prompt: `odd [[cli:ask:${odd}]] [[cli:ask-to:user]] [[cli:ask-options:a\u001b[31mred|b\u202Eblue]]`,
    });
    const { key, form, task } = await untilAsking(handle.taskId);
    const shown = JSON.stringify({ form, status: task.statusMessage });
    expect(shown).not.toMatch(/\\u001b|\\u0007|\u202E/);
    expect(form.message).toContain('Pick \uFFFD[2J\uFFFD]0;pwned\uFFFD one \uFFFDevil');
    const choices = (form.requestedSchema as { properties: { answer: { enum: string[] } } }).properties.answer.enum;
    expect(choices).toEqual(['a\uFFFD[31mred', 'b\uFFFDblue']);
    expect((await update(handle.taskId, { [key]: accept(choices[1]) })).error).toBeUndefined();
    const result = await callOk<Job>('result', { agent_id: handle.taskId });
    expect(result.conversation).toContainEqual(
      expect.objectContaining({ kind: 'answer', by: 'user', text: 'b\u202Eblue' }),
    );
    await untilDone(handle.taskId);
  });
});

describe('questions to the user that fall out of the same design', () => {
  test("a team as a task: its members' questions to the user, one dialog at a time, each naming the member", async () => {
    const handle = await callAsTask('run_team', {
      task: 'both ask [[cli:ask:Tabs or spaces?]] [[cli:ask-to:user]]',
      topology: 'map_reduce',
      members: ['codex', 'claude'],
    });
    const answered: string[] = [];
    let task = await getTask(handle.taskId);
    for (const until = Date.now() + 60_000; ['working', 'input_required'].includes(task.status);) {
      if (Date.now() > until) throw new Error(`team still running: ${JSON.stringify(task)}`);
      if (task.status === 'input_required') {
        const [key, request] = Object.entries(task.inputRequests)[0] as [string, { params: { message: string } }];
        const member = key.split('/')[0];
        expect(request.params.message).toMatch(
          new RegExp(`^Agent ${member} \\((codex|claude), [^)]+ of team ${handle.taskId}\\) asks you:`),
        );
        expect((await update(handle.taskId, { [key]: accept(`spaces ${answered.length}`) })).error).toBeUndefined();
        answered.push(key);
      } else await new Promise((resolve) => setTimeout(resolve, 100));
      task = await getTask(handle.taskId);
    }
    expect(task.status).toBe('completed');
    // Both members asked; each was answered once, in its own run.
    expect(new Set(answered.map((key) => key.split('/')[0])).size).toBe(2);
    expect(answered).toHaveLength(2);
  });

  test("a supervisor's task: a question to the user from its child team's member opens the dialog there", async () => {
    // `]]` inside the child team's task is written \u005d\u005d, so that the supervisor's own
    // directive ends where it should; the child's member reads its task decoded.
    const child = {
      topology: 'map_reduce',
      members: ['codex'],
      task: 'ask [[cli:ask:Tabs or spaces?]] [[cli:ask-to:user]]',
    };
    const directive = JSON.stringify(child).replaceAll(']]', '\\u005d\\u005d');
    const handle = await callAsTask('run_team', {
      task: `Supervise [[cli:team]] [[cli:subteam:${directive}]]`,
      topology: 'supervisor_tree',
      members: ['claude'],
    });
    let task = await getTask(handle.taskId);
    for (const until = Date.now() + 60_000; task.status !== 'input_required'; task = await getTask(handle.taskId)) {
      if (task.status !== 'working' || Date.now() > until) throw new Error(`no question: ${JSON.stringify(task)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const [key, request] = Object.entries(task.inputRequests)[0] as [string, { params: { message: string } }];
    const team = await callOk<{ child_team_ids?: string[] }>('result', { agent_id: handle.taskId });
    expect(request.params.message).toMatch(
      new RegExp(
        `^Agent ${key.split('/')[0]} \\(codex, [^)]+ of team ${team.child_team_ids![0]}\\) asks you:\\s+Tabs or spaces\\?`,
      ),
    );
    expect((await update(handle.taskId, { [key]: accept('spaces') })).error).toBeUndefined();
    const { task: done } = await untilDone(handle.taskId);
    expect(done.status).toBe('completed');
    expect(JSON.stringify(resultOf(done).structuredContent)).toContain('ANSWER spaces');
  });

  test("an ACP agent's permission request on a task is the user's: a form of its options; a declined dialog refuses it", async () => {
    const handle = await callAsTask('spawn_fakeacp', { prompt: 'make it [[acp:write from-task.txt hello]]' });
    const { key, form } = await untilAsking(handle.taskId);
    expect(form.message).toContain('The agent asks permission for edit');
    expect(form.requestedSchema).toMatchObject({ properties: { answer: { enum: ['Allow once', 'Reject'] } } });
    expect((await update(handle.taskId, { [key]: { action: 'decline' } })).error).toBeUndefined();
    const { task } = await untilDone(handle.taskId);
    // A declined dialog refuses the permission: nothing is written.
    expect(resultOf(task).structuredContent.text).toContain('from-task.txt refused');
  });
});

/** Waits until the agent has asked `n` questions. */
async function waitUntilAsked(agentId: string, n: number) {
  const until = Date.now() + 60_000;
  while (Date.now() < until) {
    const job = await callOk<Job>('result', { agent_id: agentId });
    if ((job.questions?.length ?? 0) >= n) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`agent ${agentId} did not ask ${n} questions`);
}

describe('calls that do not declare the extension behave as today', () => {
  test('a question to the user on a call without the extension reaches the orchestrator, marked as the user’s', async () => {
    const r = await modern(
      'tools/call',
      { name: 'spawn_codex', arguments: { prompt: 'q [[cli:ask:Ship it?]] [[cli:ask-to:user]]' } },
      false,
    );
    const { agent_id } = (r.result as { structuredContent: { agent_id: string } }).structuredContent;
    const waited = await callOk<{ questions?: { message_id: string; question: string; to?: string }[] }>(
      'wait_for_agents',
      {
        agent_ids: [agent_id],
        timeout_s: 60,
      },
    );
    expect(waited.questions).toMatchObject([{ message_id: 'q1', question: 'Ship it?', to: 'user' }]);
    await callOk('reply_subagent', { agent_id, message_id: 'q1', answer: 'the user says yes' });
    const done = await callOk<{ finished: { text?: string }[] }>('wait_for_agents', {
      agent_ids: [agent_id],
      timeout_s: 60,
    });
    expect(done.finished[0]?.text).toContain('ANSWER the user says yes');
  });

  test('a 2026 call without it gets the agent at once (and with wait_s its result)', async () => {
    const r = await modern('tools/call', { name: 'spawn_codex', arguments: { prompt: 'plain', wait_s: 60 } }, false);
    const result = r.result as { resultType: string; structuredContent: Record<string, unknown> };
    expect(result.resultType).toBe('complete');
    expect(result.structuredContent, JSON.stringify(result)).toMatchObject({ state: 'succeeded' });
    expect(JSON.stringify(result.structuredContent)).toContain('FAKE codex: plain');
  });
});
