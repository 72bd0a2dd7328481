// What a topology is given to run a team, and what it returns (the contract between the team
// table and the files in topologies/).
import type { JobRecord } from '../table.js';
import type { TeamEvent } from './record.js';
import type { TeamSpec } from './spec.js';
import type { TeamWorkspace } from './workspace.js';

/**
 * Thrown by TeamRun.start when no member may start: the cost of the team's tree has reached its
 * max_budget_usd (or that of a team above it), or the tree has started as many agents as it may.
 */
export class LimitReached extends Error {}

export type TeamRun = {
  readonly id: string;
  readonly spec: TeamSpec;
  readonly signal: AbortSignal;
  /** The shared task list, messages and board (leader_teammate, blackboard). */
  readonly workspace: TeamWorkspace;
  /** Starts one member job. Throws LimitReached once the budget or the agent bound is reached, InputError/SetupError for a bad member. */
  start(member: string, role: string, prompt: string, options?: { needsChannel?: boolean }): JobRecord;
  /** The job once it has finished (or as it is when the team is cancelled). */
  finished(job: JobRecord): Promise<JobRecord>;
  event(kind: TeamEvent['kind'], text: string, jobId?: string): void;
  /** The task as every member gets it: the preset's instructions first. */
  brief(): string;
  /** Ends the members still running (the leader finished; a debate member is no longer needed). */
  cancelMembers(jobIds?: string[]): Promise<void>;
};

/** `note`: what the caller should know of a team that still succeeded (a member dropped out). */
export type TopologyOutcome = { ok: boolean; answer: string; error?: string; note?: string };
