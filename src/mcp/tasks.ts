// MCP tasks (the extension io.modelcontextprotocol/tasks of protocol revision 2026-07-28) for the
// tools that start work: spawn_<backend>, spawn_<agent> and run_team. A tools/call that declares
// the extension gets a task handle at once, and the client polls tasks/get until the job or team
// ends (facts measured with the real Claude Code: /work/shared/reference/mcp-tasks.md).
//
// A task is its job or team: the task id is the agent_id or team_id, its state the job table's.
// So a task outlives the server instance that answered the call (one per request over HTTP) and
// the client's session; and list, result, logs, cancel, the dashboard and IAC.md all apply to it.
// What is kept here is only which ids were handed out as tasks, and when.
import { ProtocolError, ProtocolErrorCode, type Server } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { App } from '../app.js';
import { isFinished, type JobRecord } from '../jobs/table.js';
import { fullResult, questionsOf } from '../jobs/result.js';
import type { TeamRecord } from '../jobs/teams/record.js';
import { teamResult } from '../jobs/teams/result.js';
import { serveCustomMethod } from './sdk-seam.js';
import { toolResult } from './views.js';
import type { Work } from './tools/tool.js';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
/** How often a client should poll tasks/get: each poll only reads the job table. */
export const POLL_INTERVAL_MS = 1000;
/** How long a task can be read after it was created (its agent's record stays in the run store beyond). */
export const TASK_TTL_MS = 24 * 60 * 60_000;
/** The most tasks a process remembers; past it the oldest are forgotten (their agents stay readable by id). */
const MAX_TASKS = 10_000;
/** A task that failed: JSON-RPC's server-error range, the reason in the message. */
const TASK_FAILED = -32000;

type TaskEntry = { work: Work; createdAt: string };

/** The tasks of one app (one process): outside any server instance, which may live for one request. */
const tasksOf = new WeakMap<App, Map<string, TaskEntry>>();
function taskTable(app: App): Map<string, TaskEntry> {
  let table = tasksOf.get(app);
  if (!table) tasksOf.set(app, (table = new Map()));
  return table;
}

type Envelope = Record<string, unknown> | undefined;

/**
 * Whether a tools/call declared the tasks extension among its client capabilities: in the
 * request's `_meta` envelope, which the SDK lifts out of `_meta` (read in both places).
 */
export function declaresTasks(envelope: Envelope, meta: Envelope): boolean {
  const capabilities = (envelope?.[CLIENT_CAPABILITIES] ?? meta?.[CLIENT_CAPABILITIES]) as
    { extensions?: Record<string, unknown> } | undefined;
  const declared = capabilities?.extensions?.[TASKS_EXTENSION];
  return !!declared && typeof declared === 'object';
}

/** Remembers `work` as a task and returns the handle a tools/call answers with. */
export function createTask(app: App, work: Work) {
  const table = taskTable(app);
  const createdAt = new Date().toISOString();
  table.set(work.id, { work, createdAt });
  for (const oldest of table.keys()) {
    if (table.size <= MAX_TASKS) break;
    table.delete(oldest);
  }
  return { resultType: 'task' as const, ...taskStatus(app, work.id, { work, createdAt }) };
}

const taskIdParams = z.object({ taskId: z.string().max(200) }).passthrough();

function entryOf(app: App, taskId: string): TaskEntry {
  const entry = taskTable(app).get(taskId);
  if (!entry || Date.now() - Date.parse(entry.createdAt) > TASK_TTL_MS)
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `no task "${taskId}": tasks are the agent_ids and team_ids of spawns made as tasks, kept ${TASK_TTL_MS / 3_600_000} h; call \`list\` for the agents`,
    );
  return entry;
}

/** The task as tasks/get reports it: its status, a short message, and at the end the result or the reason. */
function taskStatus(app: App, taskId: string, entry: TaskEntry) {
  const base = { taskId, createdAt: entry.createdAt, ttlMs: TASK_TTL_MS, pollIntervalMs: POLL_INTERVAL_MS };
  if (entry.work.kind === 'job') {
    const job = app.jobs.get(entry.work.id)!;
    return { ...base, lastUpdatedAt: job.endedAt ?? job.startedAt ?? job.createdAt, ...jobStatus(app, job) };
  }
  const team = app.teams.get(entry.work.id)!;
  return { ...base, lastUpdatedAt: team.endedAt ?? team.createdAt, ...teamStatus(app, team) };
}

function jobStatus(app: App, job: JobRecord) {
  if (!isFinished(job.state)) {
    const question = questionsOf(app, job)[0];
    const message = question
      ? `waiting for an answer: ${question.question} (reply_subagent agent_id ${job.id}, message_id ${question.message_id})`
      : job.progress
        ? `${job.state}: ${app.secrets.text(job.progress.text)}`
        : job.state;
    return { status: 'working' as const, statusMessage: message };
  }
  if (job.state === 'succeeded')
    return { status: 'completed' as const, statusMessage: 'succeeded', result: toolResult(fullResult(app, job)) };
  if (job.state === 'cancelled') return { status: 'cancelled' as const, statusMessage: 'cancelled' };
  const reason = app.secrets.text(job.outcome?.error ?? job.state.replace('_', ' '));
  return {
    status: 'failed' as const,
    statusMessage: job.state.replace('_', ' '),
    error: { code: TASK_FAILED, message: `agent ${job.id} ${job.state.replace('_', ' ')}: ${reason}` },
  };
}

function teamStatus(app: App, team: TeamRecord) {
  const done = team.members.filter((m) => isFinished(m.state)).length;
  if (team.state === 'running')
    return { status: 'working' as const, statusMessage: `running: ${done} of ${team.members.length} members finished` };
  if (team.state === 'succeeded')
    return {
      status: 'completed' as const,
      statusMessage: 'succeeded',
      result: toolResult(teamResult(app, team, (id) => app.jobs.get(id))),
    };
  if (team.state === 'cancelled') return { status: 'cancelled' as const, statusMessage: 'cancelled' };
  return {
    status: 'failed' as const,
    statusMessage: team.state,
    error: {
      code: TASK_FAILED,
      message: `team ${team.id} ${team.state}: ${app.secrets.text(team.error ?? team.state)}`,
    },
  };
}

/** tasks/get, tasks/update and tasks/cancel on one server instance, over the app's tasks. */
export function serveTaskMethods(server: Server, app: App): void {
  serveCustomMethod(server, 'tasks/get', taskIdParams, async ({ taskId }) =>
    taskStatus(app, taskId, entryOf(app, taskId)),
  );
  serveCustomMethod(server, 'tasks/cancel', taskIdParams, async ({ taskId }) => {
    const { work } = entryOf(app, taskId);
    if (work.kind === 'job') await app.jobs.cancel(work.id);
    else await app.teams.cancel(work.id);
    return {};
  });
  // No task asks its client for input: an update has nothing to answer.
  serveCustomMethod(server, 'tasks/update', taskIdParams, async ({ taskId }) => {
    entryOf(app, taskId);
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `task "${taskId}" asked for no input: answer an agent's question with reply_subagent`,
    );
  });
}
