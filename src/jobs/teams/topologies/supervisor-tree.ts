// supervisor_tree: one supervisor (a CLI agent) that may split the work and run a team of its
// own over the channel (run_team, wait_team), one level deeper and inside the nesting limit.
// Its answer is the team's; teams it started and left running end with it.
import { PARENT_SERVER } from '../../conversation.js';
import type { TeamRun, TopologyOutcome } from '../run.js';
import { answerText, failureLine, succeeded } from './answers.js';

const SUPERVISOR_BRIEF =
  `You supervise. Do the task yourself, or split it: run_team (MCP server "${PARENT_SERVER}") runs a team of ` +
  'agents on a part (a topology, its members and the task) and returns a team_id; wait_team waits for its ' +
  "answer. Your final message is the team's answer.";

export async function runSupervisorTree(run: TeamRun): Promise<TopologyOutcome> {
  const member = run.spec.members[0]!;
  const job = await run.finished(
    run.start(member, 'supervisor', `${run.brief()}\n\n---\n\n${SUPERVISOR_BRIEF}`, { needsChannel: true }),
  );
  const answer = { role: 'supervisor', member, job };
  if (!succeeded(answer)) {
    run.event('failed', failureLine(answer), job.id);
    return { ok: false, answer: '', error: `the supervisor ${failureLine(answer)}` };
  }
  run.event('answer', `the supervisor (${member}) finished: the team's answer`, job.id);
  return { ok: true, answer: answerText(job) };
}
