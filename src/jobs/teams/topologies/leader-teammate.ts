// leader_teammate: a leader (the first member) plans the work as tasks on a shared list;
// teammates (the others) run at once and take the next unblocked task, over the channel's team
// tools (the task list and messages). The team ends when the leader finishes: its answer is the
// team's, and teammates still running then are ended.
import { z } from 'zod';
import { InputError } from '../../../lib/errors.js';
import { ANSWER_WAIT_S, PARENT_SERVER } from '../../conversation.js';
import { memberTool, type MemberSession, type TeamRun, type Topology, type TopologyOutcome } from '../topology.js';
import type { TeamRecord } from '../record.js';
import { cell, plannedStep, type TeamView } from '../view.js';
import { TaskList, TASK_LIST_LIMITS as LIMITS } from './task-list.js';
import { answerText, failureLine, succeeded } from './answers.js';

const LEADER_BRIEF =
  `You lead a team. Plan the work as tasks on the team's task list (tools of the MCP server "${PARENT_SERVER}": ` +
  'task_create with a subject, a description and blocked_by for order); your teammates take them. Follow with ' +
  'read_messages (it waits for news) and task_list; send_message and broadcast reach them. When every task is ' +
  "done, write the team's final answer as your last message: teammates still running then are ended.";

const TEAMMATE_BRIEF =
  `You are a teammate. Take work from the team's task list (tools of the MCP server "${PARENT_SERVER}"): ` +
  'task_claim gives you the next unblocked task; do it, then task_update it "done" with your result (or ' +
  '"failed" with why). Then claim the next. When there is none, read_messages waits for new tasks or messages; ' +
  'stop when the leader says the work is done or no task is left after a wait.';

async function runLeaderTeammate(run: TeamRun<TaskList>): Promise<TopologyOutcome> {
  const [leaderMember, ...teammates] = run.spec.members as [string, ...string[]];
  const leader = run.start(leaderMember, 'leader', `${run.brief()}\n\n---\n\n${LEADER_BRIEF}`, { needsChannel: true });
  for (const [i, member] of teammates.entries())
    run.start(member, `teammate ${i + 1}`, `${run.brief()}\n\n---\n\n${TEAMMATE_BRIEF}`, { needsChannel: true });
  const done = await run.finished(leader);
  const answer = { role: 'leader', member: leaderMember, job: done };
  if (!succeeded(answer)) {
    run.event('failed', failureLine(answer), done.id);
    return { ok: false, answer: '', error: `the leader ${failureLine(answer)}` };
  }
  run.event('answer', `the leader (${leaderMember}) finished: the team's answer`, done.id);
  const open = run.state.listTasks().filter((t) => t.status === 'open' || t.status === 'claimed');
  return {
    ok: true,
    answer: answerText(done),
    note: open.length ? `${open.length} task(s) were not done when the leader finished` : undefined,
  };
}

const text = z.string().min(1).max(LIMITS.textChars);

/** The task list and messages, for one member. */
function memberTools({ jobId, team, state: tasks }: MemberSession<TaskList>) {
  const members = () =>
    team.members.map((m) => ({ agent_id: m.jobId, member: m.member, role: m.role, state: m.state }));
  return [
    memberTool({
      name: 'task_create',
      description: "Add a task to the team's list; blocked_by: ids of tasks that must be done first.",
      inputSchema: {
        subject: z.string().min(1).max(LIMITS.subjectChars),
        description: text.optional(),
        blocked_by: z.array(z.string().max(16)).max(50).optional(),
      },
      call: ({ subject, description, blocked_by }) => ({
        task: tasks.createTask(jobId, subject, description, blocked_by),
      }),
    }),
    memberTool({
      name: 'task_list',
      description: "The team's tasks and members.",
      inputSchema: {},
      call: () => ({ tasks: tasks.listTasks(jobId), members: members(), you: jobId }),
    }),
    memberTool({
      name: 'task_claim',
      description: 'Take a task (the next unblocked one, or task_id); task: null when none is free.',
      inputSchema: { task_id: z.string().max(16).optional() },
      call: ({ task_id }) => ({ task: tasks.claim(jobId, task_id) ?? null }),
    }),
    memberTool({
      name: 'task_update',
      description: 'Mark your task done (with its result), failed (with why), or open again.',
      inputSchema: {
        task_id: z.string().max(16),
        status: z.enum(['done', 'failed', 'open']),
        result: text.optional(),
      },
      call: ({ task_id, status, result }) => ({ task: tasks.update(jobId, task_id, status, result) }),
    }),
    memberTool({
      name: 'send_message',
      description: 'A message to one member (its agent_id, from task_list).',
      inputSchema: { to: z.string().min(1).max(64), text },
      call: ({ to, text: message }) => {
        if (!team.members.some((m) => m.jobId === to))
          throw new InputError(`no member "${to}" in this team: task_list shows their agent_ids`);
        return { message: tasks.send(jobId, message, to) };
      },
    }),
    memberTool({
      name: 'broadcast',
      description: 'A message to every member.',
      inputSchema: { text },
      call: ({ text: message }) => ({ message: tasks.send(jobId, message) }),
    }),
    memberTool({
      name: 'read_messages',
      description: `Your unread messages; with none, waits up to ${ANSWER_WAIT_S} s for one or for a change of the task list.`,
      inputSchema: {},
      call: async (_args, signal) => ({
        messages: await tasks.read(jobId, ANSWER_WAIT_S * 1000, signal),
        tasks: tasks.listTasks(),
      }),
    }),
  ];
}

/** The leader, its teammates, and the task list: who claimed what, done or not. */
function leaderView(team: TeamRecord, tasks: TaskList | undefined): TeamView {
  const [leader, ...teammates] = team.spec.members as [string, ...string[]];
  const slots = teammates.map((member, i) => ({
    member,
    jobId: team.members.find((m) => m.role === `teammate ${i + 1}`)?.jobId,
  }));
  const rows = (tasks?.listTasks() ?? []).map((t) => [
    t.id,
    t.subject,
    t.status,
    t.owner ? { agent: t.owner } : '',
    t.blockedBy.join(', '),
    cell(t.result),
  ]);
  return {
    steps: [plannedStep(team, 'leader', leader), { title: 'teammates', slots }],
    together: true,
    tables: [
      {
        title: 'Tasks',
        columns: ['task', 'subject', 'status', 'claimed by', 'blocked by', 'result'],
        rows,
        empty: tasks
          ? 'No task yet: the leader plans them.'
          : 'The task list lived in the server that ran this team: its events below say what happened.',
      },
    ],
  };
}

export const leaderTeammate: Topology<TaskList> = {
  name: 'leader_teammate',
  description: 'the first CLI member lists tasks, the others take them.',
  refuse: (spec) => (spec.members.length < 2 ? 'members: the leader first, then at least one teammate' : undefined),
  plannedAgents: (spec) => spec.members.length,
  channel: true,
  state: (report) => new TaskList(report),
  memberTools,
  view: leaderView,
  run: runLeaderTeammate,
};
