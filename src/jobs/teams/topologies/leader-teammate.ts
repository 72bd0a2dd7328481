// leader_teammate: a leader (the first member) plans the work as tasks on a shared list;
// teammates (the others) run at once and take the next unblocked task, over the channel's team
// tools. The team ends when the leader finishes: its answer is the team's, and teammates still
// running then are ended.
import { PARENT_SERVER } from '../../conversation.js';
import type { TeamRun, TopologyOutcome } from '../run.js';
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

export async function runLeaderTeammate(run: TeamRun): Promise<TopologyOutcome> {
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
  const open = run.workspace.listTasks().filter((t) => t.status === 'open' || t.status === 'claimed');
  return {
    ok: true,
    answer: answerText(done),
    ...(open.length ? { note: `${open.length} task(s) were not done when the leader finished` } : {}),
  };
}
