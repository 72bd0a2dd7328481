// A team as the record keeps it: what was asked, its members' jobs, the order of events and the
// team's answer. The team itself runs no process: its members are ordinary jobs, tagged with it.
import type { JobState } from '../table.js';
import type { TeamSpec } from './spec.js';

export const TEAM_STATES = ['running', 'succeeded', 'failed', 'cancelled', 'interrupted'] as const;
export type TeamState = (typeof TEAM_STATES)[number];

/** One member job of the team, as of its last change. */
type TeamMember = {
  jobId: string;
  /** The member as the caller named it: `codex`, `reviewer`, `claude:opus`. */
  member: string;
  /** Its part: "member 2", "stage 1", "round 3", "reduce", "judge", "leader", "teammate", "supervisor". */
  role: string;
  state: JobState;
  costUsd?: number;
  inputTokens?: number;
  outputTokens?: number;
  cachedInputTokens?: number;
};

export type TeamEvent = {
  at: string;
  kind:
    | 'started'
    | 'answer'
    | 'failed'
    | 'skipped'
    | 'round'
    | 'task'
    | 'message'
    | 'board'
    | 'team'
    | 'budget'
    | 'limit'
    | 'end';
  text: string;
  /** The member job it is about, if any. */
  jobId?: string;
};

export type TeamRecord = {
  id: string;
  spec: TeamSpec;
  state: TeamState;
  createdAt: string;
  endedAt?: string;
  members: TeamMember[];
  events: TeamEvent[];
  /** The team's answer (also partial, when it failed or ran out of budget). */
  answer?: string;
  error?: string;
  /** What to know of a team that succeeded all the same (a member dropped out, a stage was passed over). */
  note?: string;
  /**
   * True when the team stopped starting members because the cost of its tree (its members and the
   * teams below it, finished ones at their cost, running ones at their own max_budget_usd) reached
   * its max_budget_usd or that of a team above it.
   */
  budgetReached?: boolean;
  /** Teams a supervisor member started (supervisor_tree). */
  children?: string[];
  /** The polyspawn server running it: a stored team whose server is gone was interrupted. */
  owner?: { pid: number; start?: string };
};

/** A team's id: `team-` and six letters or digits. */
export const TEAM_ID = /^team-[a-z2-9]{6}$/;

export const isTeamFinished = (state: TeamState) => state !== 'running';

/** Events kept per team: a long blackboard or task list must not grow the record without end. */
export const MAX_EVENTS = 500;

export function teamTotals(team: Pick<TeamRecord, 'members'>): {
  costUsd?: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
} {
  let cost: number | undefined;
  let input = 0;
  let output = 0;
  let cached = 0;
  for (const m of team.members) {
    if (m.costUsd !== undefined) cost = (cost ?? 0) + m.costUsd;
    input += m.inputTokens ?? 0;
    output += m.outputTokens ?? 0;
    cached += m.cachedInputTokens ?? 0;
  }
  return {
    // Summed floats (0.000188 + 0.00017 …) carry noise in the last digits: kept to 1e-10 USD.
    costUsd: cost === undefined ? undefined : Math.round(cost * 1e10) / 1e10,
    inputTokens: input,
    outputTokens: output,
    cachedInputTokens: cached,
  };
}
