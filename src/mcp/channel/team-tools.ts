// What a team's member gets on its channel besides ask_parent: the shared task list and messages
// (leader_teammate), the board (blackboard), or a team of its own (supervisor_tree). Each call
// speaks for the member whose token opened the session.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { App } from '../../app.js';
import { ANSWER_WAIT_S } from '../../jobs/conversation.js';
import { isTeamFinished } from '../../jobs/teams/record.js';
import { teamResult } from '../../jobs/teams/result.js';
import { TEAM_ID } from '../../jobs/teams/table.js';
import { WORKSPACE_LIMITS as LIMITS } from '../../jobs/teams/workspace.js';
import { runTeamInput, startTeam } from '../tools/run-team.js';
import { toolResult } from '../views.js';
import { InputError } from '../../lib/errors.js';

const text = z.string().min(1).max(LIMITS.textChars);
const annotations = { readOnlyHint: true, openWorldHint: false } as const;

export function registerTeamTools(server: McpServer, app: App, jobId: string): void {
  const membership = app.teams.teamOf(jobId);
  if (!membership) return;
  const { team, workspace } = membership;
  const topology = team.spec.topology;
  const members = () =>
    team.members.map((m) => ({ agent_id: m.jobId, member: m.member, role: m.role, state: m.state }));

  if (topology === 'leader_teammate') {
    server.registerTool(
      'task_create',
      {
        description: "Add a task to the team's list; blocked_by: ids of tasks that must be done first.",
        inputSchema: {
          subject: z.string().min(1).max(LIMITS.subjectChars),
          description: text.optional(),
          blocked_by: z.array(z.string().max(16)).max(50).optional(),
        },
        annotations,
      },
      async ({ subject, description, blocked_by }) =>
        toolResult({ task: workspace.createTask(jobId, subject, description, blocked_by) }),
    );
    server.registerTool(
      'task_list',
      { description: "The team's tasks and members.", inputSchema: {}, annotations },
      async () => toolResult({ tasks: workspace.listTasks(jobId), members: members(), you: jobId }),
    );
    server.registerTool(
      'task_claim',
      {
        description: 'Take a task (the next unblocked one, or task_id); task: null when none is free.',
        inputSchema: { task_id: z.string().max(16).optional() },
        annotations,
      },
      async ({ task_id }) => toolResult({ task: workspace.claim(jobId, task_id) ?? null }),
    );
    server.registerTool(
      'task_update',
      {
        description: 'Mark your task done (with its result), failed (with why), or open again.',
        inputSchema: {
          task_id: z.string().max(16),
          status: z.enum(['done', 'failed', 'open']),
          result: text.optional(),
        },
        annotations,
      },
      async ({ task_id, status, result }) => toolResult({ task: workspace.update(jobId, task_id, status, result) }),
    );
    server.registerTool(
      'send_message',
      {
        description: 'A message to one member (its agent_id, from task_list).',
        inputSchema: { to: z.string().min(1).max(64), text },
        annotations,
      },
      async ({ to, text: message }) => {
        if (!team.members.some((m) => m.jobId === to))
          throw new InputError(`no member "${to}" in this team: task_list shows their agent_ids`);
        return toolResult({ message: workspace.send(jobId, message, to) });
      },
    );
    server.registerTool(
      'broadcast',
      { description: 'A message to every member.', inputSchema: { text }, annotations },
      async ({ text: message }) => toolResult({ message: workspace.send(jobId, message) }),
    );
    server.registerTool(
      'read_messages',
      {
        description: `Your unread messages; with none, waits up to ${ANSWER_WAIT_S} s for one or for a change of the task list.`,
        inputSchema: {},
        annotations,
      },
      async (_args, extra) =>
        toolResult({
          messages: await workspace.read(jobId, ANSWER_WAIT_S * 1000, extra.signal),
          tasks: workspace.listTasks(),
        }),
    );
  }

  if (topology === 'blackboard') {
    server.registerTool(
      'board_read',
      {
        description: 'The board (or one key), with who wrote each entry and when.',
        inputSchema: { key: z.string().max(LIMITS.keyChars).optional() },
        annotations,
      },
      async ({ key }) => toolResult({ entries: workspace.boardRead(key) }),
    );
    server.registerTool(
      'board_write',
      {
        description: 'Write a key on the board. The key "done" ends the team: its value is the answer.',
        inputSchema: { key: z.string().min(1).max(LIMITS.keyChars), value: text },
        annotations,
      },
      async ({ key, value }) => toolResult({ entry: workspace.boardWrite(jobId, key, value) }),
    );
  }

  if (topology === 'supervisor_tree') {
    server.registerTool(
      'run_team',
      {
        description:
          "Run a team of agents on a part of your task, within your team's budget, limits and agent bound; returns its team_id (then wait_team).",
        inputSchema: runTeamInput.shape,
        annotations: { readOnlyHint: false, openWorldHint: true },
      },
      async (args) => {
        // The supervisor asks in the name of the client its team runs for: never a wider one.
        const child = startTeam(app, args, { caller: team.spec.caller, parent: { teamId: team.id, jobId } });
        return toolResult({ team_id: child.id, state: child.state });
      },
    );
    server.registerTool(
      'wait_team',
      {
        description: `Wait up to ${ANSWER_WAIT_S} s for a team you started; its answer once finished.`,
        inputSchema: { team_id: z.string().regex(TEAM_ID) },
        annotations,
      },
      async ({ team_id }, extra) => {
        if (!(team.children ?? []).includes(team_id))
          throw new InputError(`${team_id} is not a team you started: pass the team_id run_team returned`);
        const child = await app.teams.waitFor(team_id, { timeoutMs: ANSWER_WAIT_S * 1000, signal: extra.signal });
        if (!isTeamFinished(child.state)) return toolResult({ team_id, state: child.state, pending: true });
        return toolResult(teamResult(app, child, (id) => app.jobs.get(id)));
      },
    );
  }
}
