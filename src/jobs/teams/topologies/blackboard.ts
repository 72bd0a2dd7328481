// blackboard: members share a key/value board over the channel (board_read, board_write) and
// run in rounds, each seeing the board as it is, until one writes the key `done` (its value is
// the team's answer) or the rounds run out.
import { z } from 'zod';
import { InputError } from '../../../lib/errors.js';
import { clip } from '../../../lib/text.js';
import { checkLength, PARENT_SERVER } from '../../conversation.js';
import { DEFAULT_ROUNDS, roundsOption } from '../spec.js';
import {
  memberTool,
  type MemberSession,
  type TeamReport,
  type TeamRun,
  type Topology,
  type TopologyOutcome,
} from '../topology.js';
import { failureLine, succeeded } from './answers.js';
import type { TeamRecord } from '../record.js';
import { cell, type TeamView } from '../view.js';

type BoardEntry = { key: string; value: string; author: string; at: string };

export const BOARD_LIMITS = { keys: 200, keyChars: 200, valueChars: 20_000 } as const;

/** The key a member writes to end the team: its value is the team's answer. */
const DONE_KEY = 'done';

/** The team's board: one entry per key, the newest write kept with its author. */
export class Board {
  private readonly entries = new Map<string, BoardEntry>();
  private readonly doneListeners = new Set<(entry: BoardEntry) => void>();

  constructor(private readonly report: TeamReport) {}

  read(key?: string): BoardEntry[] {
    if (key !== undefined) {
      const entry = this.entries.get(key);
      return entry ? [{ ...entry }] : [];
    }
    return [...this.entries.values()].map((e) => ({ ...e }));
  }

  write(author: string, key: string, value: string): BoardEntry {
    checkLength("the board's key", key, BOARD_LIMITS.keyChars);
    checkLength(`the value of ${clip(key, 40)}`, value, BOARD_LIMITS.valueChars);
    if (!this.entries.has(key) && this.entries.size >= BOARD_LIMITS.keys)
      throw new InputError(`the board holds ${BOARD_LIMITS.keys} keys, the most it may: write to existing ones`);
    const entry: BoardEntry = { key, value, author, at: new Date().toISOString() };
    this.entries.set(key, entry);
    this.report('board', `${author} wrote ${key}: ${clip(value)}`, author);
    if (key === DONE_KEY) for (const listener of [...this.doneListeners]) listener(entry);
    return { ...entry };
  }

  /** Called once a member writes the `done` key. */
  onDone(listener: (entry: BoardEntry) => void): () => void {
    this.doneListeners.add(listener);
    return () => this.doneListeners.delete(listener);
  }
}

const show = (entries: BoardEntry[]) =>
  entries.length
    ? entries.map((e) => `- ${e.key} (by ${e.author}): ${e.value}`).join('\n')
    : '(empty: nothing has been written yet)';

async function runBlackboard(run: TeamRun<Board>): Promise<TopologyOutcome> {
  const { spec, state: board } = run;
  const rounds = spec.rounds ?? DEFAULT_ROUNDS;
  let done: BoardEntry | undefined;
  let roundJobs: string[] = [];
  // Once the answer is on the board, the round's other members are no longer needed (its
  // author finishes its run).
  const stop = board.onDone((entry) => {
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
        `solved, write the key "${DONE_KEY}" with the final answer.\n\nThe board now:\n${show(board.read())}`;
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
        return { ok: false, answer: show(board.read()), error: `every member failed in round ${round}` };
    }
  } finally {
    stop();
  }
  if (done) return { ok: true, answer: done.value };
  return {
    ok: false,
    answer: show(board.read()),
    error: `no member wrote "${DONE_KEY}" in ${rounds} round(s): the board is the team's answer so far`,
  };
}

/** The board, for one member. */
const memberTools = ({ jobId, state: board }: MemberSession<Board>) => [
  memberTool({
    name: 'board_read',
    description: 'The board (or one key), with who wrote each entry and when.',
    inputSchema: { key: z.string().max(BOARD_LIMITS.keyChars).optional() },
    call: ({ key }) => ({ entries: board.read(key) }),
  }),
  memberTool({
    name: 'board_write',
    description: 'Write a key on the board. The key "done" ends the team: its value is the answer.',
    inputSchema: {
      key: z.string().min(1).max(BOARD_LIMITS.keyChars),
      value: z.string().min(1).max(BOARD_LIMITS.valueChars),
    },
    call: ({ key, value }) => ({ entry: board.write(jobId, key, value) }),
  }),
];

/** The rounds (every member in each, in the order they started) and the board. */
function boardView(team: TeamRecord, board: Board | undefined): TeamView {
  const { spec } = team;
  const n = spec.members.length;
  const steps = Array.from({ length: spec.rounds ?? DEFAULT_ROUNDS }, (_, r) => {
    const started = team.members.slice(r * n, (r + 1) * n);
    return {
      title: `round ${r + 1}`,
      slots: started.length
        ? started.map((m) => ({ member: m.member, jobId: m.jobId }))
        : spec.members.map((member) => ({ member })),
    };
  });
  const rows = (board?.read() ?? []).map((e) => [e.key, cell(e.value), { agent: e.author }, e.at]);
  const empty = board
    ? 'Nothing written yet.'
    : 'The board lived in the server that ran this team: its events below say what was written.';
  return { steps, tables: [{ title: 'Board', columns: ['key', 'value', 'by', 'at'], rows, empty }] };
}

export const blackboard: Topology<Board> = {
  name: 'blackboard',
  description: 'CLI members share a key/value board until one writes "done".',
  options: { rounds: roundsOption },
  plannedAgents: (spec) => spec.members.length * (spec.rounds ?? DEFAULT_ROUNDS),
  channel: true,
  state: (report) => new Board(report),
  memberTools,
  view: boardView,
  run: runBlackboard,
};
