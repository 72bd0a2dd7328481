// MCP tasks (the extension io.modelcontextprotocol/tasks of protocol revision 2026-07-28) for the
// tools that start work: spawn_<backend>, spawn_<agent> and run_team. A tools/call that declares
// the extension gets a task handle at once, and the client polls tasks/get until the job or team
// ends (facts measured with the real Claude Code: /work/shared/reference/mcp-tasks.md).
//
// A task is its job or team: the task id is the agent_id or team_id, its state the job table's.
// So a task outlives the server instance that answered the call (one per request over HTTP) and
// the client's session; and list, result, logs, cancel, the dashboard and IAC.md all apply to it.
// What is kept here is only which ids were handed out as tasks, and when.
//
// An agent's question to the user (ask_parent with to: "user", an ACP agent's permission
// request) puts its task in `input_required` with a form built from the question and its
// options; the client shows it to the user and sends the answer back with tasks/update. The
// question is the job's, as any other: reply_subagent and the dashboard can answer it too, and
// the first answer wins (JobTable.reply); a later one is refused, saying who answered.
import { inputResponse, ProtocolError, ProtocolErrorCode, type Server } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { App } from '../app.js';
import {
  CONVERSATION_LIMITS,
  openQuestions,
  USER_DECLINED,
  USER_DISMISSED,
  type Question,
} from '../jobs/conversation.js';
import { isFinished, type JobRecord } from '../jobs/table.js';
import { fullResult, questionsOf } from '../jobs/result.js';
import type { TeamRecord } from '../jobs/teams/record.js';
import { teamResult } from '../jobs/teams/result.js';
import { clip, printable } from '../lib/text.js';
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
  const asking = userQuestionOf(app, entry.work);
  if (asking) return { ...base, lastUpdatedAt: asking.question.at, ...inputRequired(app, asking) };
  if (entry.work.kind === 'job') {
    const job = app.jobs.get(entry.work.id)!;
    return { ...base, lastUpdatedAt: lastUpdateOf(job), ...jobStatus(app, job) };
  }
  const team = app.teams.get(entry.work.id)!;
  return { ...base, lastUpdatedAt: team.endedAt ?? team.createdAt, ...teamStatus(app, team) };
}

/** When the job last changed as a task sees it: its state, or a question, answer or progress line since. */
function lastUpdateOf(job: JobRecord): string {
  const times = [job.endedAt ?? job.startedAt ?? job.createdAt, job.conversation?.at(-1)?.at ?? ''];
  return times.reduce((a, b) => (Date.parse(b) > Date.parse(a) ? b : a));
}

/** A running job's open question to the user. */
type Asking = { job: JobRecord; question: Question };

/** The jobs of a task: its job, or its team's members. */
function jobsOf(app: App, work: Work): JobRecord[] {
  const ids = work.kind === 'job' ? [work.id] : teamJobIds(app, work.id, new Set());
  return ids.flatMap((id) => app.jobs.get(id) ?? []);
}

/** A team's members and those of every team below it (a supervisor's): their questions are the task's too. */
function teamJobIds(app: App, teamId: string, seen: Set<string>): string[] {
  const team = seen.has(teamId) ? undefined : app.teams.get(teamId);
  if (!team) return [];
  seen.add(teamId);
  return [...team.members.map((m) => m.jobId), ...(team.children ?? []).flatMap((id) => teamJobIds(app, id, seen))];
}

/**
 * The oldest open question to the user among the task's running jobs: one dialog at a time, so
 * that an agent that asks many puts one in front of the user, and the next only once it is answered.
 */
function userQuestionOf(app: App, work: Work): Asking | undefined {
  const asking = jobsOf(app, work)
    .filter((job) => job.state === 'running')
    .flatMap((job) =>
      openQuestions(job.conversation).flatMap((question) => (question.to === 'user' ? [{ job, question }] : [])),
    );
  return asking.sort((a, b) => a.question.at.localeCompare(b.question.at))[0];
}

/** A question's key in a task's inputRequests and in the tasks/update that answers it. */
const inputKey = (jobId: string, messageId: string) => `${jobId}/${messageId}`;
/** The form's one field. */
const ANSWER_FIELD = 'answer';

/**
 * The task waiting for the user: the question as an elicitation form (the client's dialog). Its
 * text is the agent's, so it is redacted, and shown without the control characters that could
 * drive the user's terminal; options become the field's choices.
 */
function inputRequired(app: App, { job, question }: Asking) {
  const text = printable(app.secrets.text(question.text));
  const who = `Agent ${job.id} (${job.backend}${job.team ? `, ${job.team.role} of team ${job.team.id}` : ''})`;
  const choices = question.options && [...new Set(question.options.map((o) => printable(app.secrets.text(o))))];
  const field = {
    type: 'string',
    title: 'Your answer',
    ...(choices ? { enum: choices } : { maxLength: CONVERSATION_LIMITS.answerChars }),
  };
  return {
    status: 'input_required' as const,
    statusMessage: `waiting for the user's answer: ${clip(text.replace(/\s+/g, ' '), 200)}`,
    inputRequests: {
      [inputKey(job.id, question.messageId)]: {
        method: 'elicitation/create' as const,
        params: {
          mode: 'form' as const,
          message: `${who} asks you:\n\n${text}`,
          requestedSchema: { type: 'object', properties: { [ANSWER_FIELD]: field }, required: [ANSWER_FIELD] },
        },
      },
    },
  };
}

/**
 * What one entry of a tasks/update's inputResponses answers, checked as JobTable.reply would (the
 * question open, its job running here) before anything is answered; throws, saying what to change.
 */
function userAnswer(app: App, taskId: string, work: Work, key: string, response: unknown) {
  const refuse = (why: string) =>
    new ProtocolError(ProtocolErrorCode.InvalidParams, `inputResponses["${clip(key, 80)}"]: ${why}`);
  const slash = key.indexOf('/');
  const [jobId, messageId] = [key.slice(0, slash), key.slice(slash + 1)];
  const job = slash > 0 ? jobsOf(app, work).find((j) => j.id === jobId) : undefined;
  const question = job?.conversation?.find((e): e is Question => e.kind === 'question' && e.messageId === messageId);
  if (!job || question?.to !== 'user')
    throw refuse(
      `task "${taskId}" asked no such question of the user: answer under the key of its inputRequests (tasks/get)`,
    );
  const view = inputResponse({ [key]: response }, key);
  if (view.kind !== 'elicit')
    throw refuse('not an elicitation result: send {action: "accept", content: {answer: "…"}}, or action "decline"');
  let text: string;
  if (view.action === 'decline') text = USER_DECLINED;
  else if (view.action === 'cancel') text = USER_DISMISSED;
  else {
    const given = view.content?.[ANSWER_FIELD];
    if (typeof given !== 'string') throw refuse(`accepted without an answer: put the text in content.${ANSWER_FIELD}`);
    // A choice comes back as shown: the agent gets its own option.
    text = question.options?.find((o) => printable(app.secrets.text(o)) === given) ?? given;
  }
  try {
    app.jobs.checkReply(job.id, messageId, text);
  } catch (error) {
    throw refuse((error as Error).message);
  }
  return { jobId: job.id, messageId, text };
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
  // The user's answers from the client's dialog. Every entry is checked before any is given, so
  // an update is answered whole or not at all.
  serveCustomMethod(server, 'tasks/update', taskIdParams, async ({ taskId }, { inputResponses }) => {
    const { work } = entryOf(app, taskId);
    const entries = Object.entries(inputResponses ?? {});
    if (entries.length === 0)
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `tasks/update of task "${taskId}" holds no inputResponses: answer the inputRequests tasks/get gave, each under its key`,
      );
    if (entries.length > CONVERSATION_LIMITS.openQuestions)
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `tasks/update holds ${entries.length} inputResponses; a task asks one question of the user at a time: answer that one`,
      );
    const answers = entries.map(([key, response]) => userAnswer(app, taskId, work, key, response));
    for (const { jobId, messageId, text } of answers) app.jobs.reply(jobId, messageId, text, 'user');
    return {};
  });
}
