// supervisor_tree: one supervisor (a CLI agent) that may split the work and run a team of its
// own over the channel (run_team, wait_team), one level deeper and inside the nesting limit.
// Its answer is the team's; teams it started and left running end with it.
import { z } from 'zod';
import { InputError } from '../../../lib/errors.js';
import { ANSWER_WAIT_S, PARENT_SERVER } from '../../conversation.js';
import { isTeamFinished, TEAM_ID } from '../record.js';
import { memberTool, type MemberSession, type TeamRun, type Topology, type TopologyOutcome } from '../topology.js';
import { answerText, failureLine, succeeded } from './answers.js';
import { plannedStep } from '../view.js';

const SUPERVISOR_BRIEF =
  `You supervise. Do the task yourself, or split it: run_team (MCP server "${PARENT_SERVER}") runs a team of ` +
  'agents on a part (a topology, its members and the task) and returns a team_id; wait_team waits for its ' +
  "answer. Your final message is the team's answer.";

async function runSupervisorTree(run: TeamRun): Promise<TopologyOutcome> {
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

/** A team of its own: run_team, and wait_team for its answer. */
const memberTools = ({ jobId, team, teams }: MemberSession) => [
  memberTool({
    name: 'run_team',
    description:
      "Run a team of agents on a part of your task, within your team's budget, limits and agent bound; returns its team_id (then wait_team).",
    inputSchema: teams.inputSchema,
    annotations: { readOnlyHint: false, openWorldHint: true },
    call: (args) => {
      // The supervisor asks in the name of the client its team runs for: never a wider one.
      const child = teams.start(args, { caller: team.spec.caller, parent: { teamId: team.id, jobId } });
      return { team_id: child.id, state: child.state };
    },
  }),
  memberTool({
    name: 'wait_team',
    description: `Wait up to ${ANSWER_WAIT_S} s for a team you started; its answer once finished.`,
    inputSchema: { team_id: z.string().regex(TEAM_ID) },
    call: async ({ team_id }, signal) => {
      if (!(team.children ?? []).includes(team_id))
        throw new InputError(`${team_id} is not a team you started: pass the team_id run_team returned`);
      const child = await teams.waitFor(team_id, { timeoutMs: ANSWER_WAIT_S * 1000, signal });
      if (!isTeamFinished(child.state)) return { team_id, state: child.state, pending: true };
      return teams.result(child);
    },
  }),
];

export const supervisorTree: Topology = {
  name: 'supervisor_tree',
  description: "a CLI supervisor that may run its own team, within this one's limits.",
  refuse: (spec) =>
    spec.members.length !== 1
      ? 'members: exactly one supervisor (a CLI agent, which may run a team of its own)'
      : undefined,
  // Its own team is counted when it starts.
  plannedAgents: () => 1,
  channel: true,
  runsTeams: true,
  memberTools,
  // The teams it started are the record's children, which every team's page draws.
  view: (team) => ({ steps: [plannedStep(team, 'supervisor', team.spec.members[0]!)], tables: [] }),
  run: runSupervisorTree,
};
