// blackboard: members share a key/value board over the channel (board_read, board_write) and
// run in rounds, each seeing the board as it is, until one writes the key `done` (its value is
// the team's answer) or the rounds run out.
import { z } from 'zod';
import { PARENT_SERVER } from '../../conversation.js';
import { DEFAULT_ROUNDS, roundsOption } from '../spec.js';
import { memberTool, type MemberSession, type TeamRun, type Topology, type TopologyOutcome } from '../topology.js';
import { DONE_KEY, TeamWorkspace, WORKSPACE_LIMITS as LIMITS, type BoardEntry } from '../workspace.js';
import { failureLine, succeeded } from './answers.js';

const board = (entries: BoardEntry[]) =>
  entries.length
    ? entries.map((e) => `- ${e.key} (by ${e.author}): ${e.value}`).join('\n')
    : '(empty: nothing has been written yet)';

async function runBlackboard(run: TeamRun<TeamWorkspace>): Promise<TopologyOutcome> {
  const { spec, state: workspace } = run;
  const rounds = spec.rounds ?? DEFAULT_ROUNDS;
  let done: BoardEntry | undefined;
  let roundJobs: string[] = [];
  // Once the answer is on the board, the round's other members are no longer needed (its
  // author finishes its run).
  const stop = workspace.onDone((entry) => {
    // The first answer written ends the round: a second member writing done as well (before it
    // was ended) must not end the first one's run, nor replace its answer.
    if (done) return;
    done = entry;
    void run.cancelMembers(roundJobs.filter((id) => id !== entry.author));
  });
  try {
    for (let round = 1; round <= rounds && !done; round++) {
      run.event('round', `round ${round} of ${rounds}`);
      const ask =
        `Round ${round} of ${rounds}. You work with other experts through a shared board: read it with board_read ` +
        `and add what you know or found with board_write (MCP server "${PARENT_SERVER}"). When the task is ` +
        `solved, write the key "${DONE_KEY}" with the final answer.\n\nThe board now:\n${board(workspace.boardRead())}`;
      const jobs = spec.members.map((member, i) =>
        run.start(member, `member ${i + 1}`, `${run.brief()}\n\n---\n\n${ask}`, { needsChannel: true }),
      );
      roundJobs = jobs.map((j) => j.id);
      const finished = await Promise.all(jobs.map((j) => run.finished(j)));
      finished.forEach((job, i) => {
        const answer = { role: `member ${i + 1}`, member: spec.members[i]!, job };
        if (!succeeded(answer) && !(done && job.state === 'cancelled'))
          run.event('failed', failureLine(answer), job.id);
      });
      if (!done && finished.every((j) => j.state !== 'succeeded'))
        return { ok: false, answer: board(workspace.boardRead()), error: `every member failed in round ${round}` };
    }
  } finally {
    stop();
  }
  if (done) return { ok: true, answer: done.value };
  return {
    ok: false,
    answer: board(workspace.boardRead()),
    error: `no member wrote "${DONE_KEY}" in ${rounds} round(s): the board is the team's answer so far`,
  };
}

/** The board, for one member. */
const memberTools = ({ jobId, state: workspace }: MemberSession<TeamWorkspace>) => [
  memberTool({
    name: 'board_read',
    description: 'The board (or one key), with who wrote each entry and when.',
    inputSchema: { key: z.string().max(LIMITS.keyChars).optional() },
    call: ({ key }) => ({ entries: workspace.boardRead(key) }),
  }),
  memberTool({
    name: 'board_write',
    description: 'Write a key on the board. The key "done" ends the team: its value is the answer.',
    inputSchema: { key: z.string().min(1).max(LIMITS.keyChars), value: z.string().min(1).max(LIMITS.textChars) },
    call: ({ key, value }) => ({ entry: workspace.boardWrite(jobId, key, value) }),
  }),
];

export const blackboard: Topology<TeamWorkspace> = {
  name: 'blackboard',
  description: 'CLI members share a key/value board until one writes "done".',
  options: { rounds: roundsOption },
  plannedAgents: (spec) => spec.members.length * (spec.rounds ?? DEFAULT_ROUNDS),
  channel: true,
  state: (report) => new TeamWorkspace(report),
  memberTools,
  run: runBlackboard,
};
