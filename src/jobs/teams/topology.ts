// The topology contract (docs/ARCHITECTURE.md, "Adding a topology"): what one file in
// topologies/ declares and topologies/registry.ts lists. The team table runs it; run_team's
// description and schema, the option checks and the channel's member tools are derived from it.
import type { z } from 'zod';
import type { JobRecord } from '../table.js';
import type { TeamEvent, TeamRecord } from './record.js';
import type { TeamSpec } from './spec.js';
import type { TeamView } from './view.js';

/**
 * Thrown by TeamRun.start when no member may start: the cost of the team's tree has reached its
 * max_budget_usd (or that of a team above it), or the tree has started as many agents as it may.
 */
export class LimitReached extends Error {}

/** What a topology is given to run a team; `state` is what its `state()` made for this team. */
export type TeamRun<S = unknown> = {
  readonly id: string;
  readonly spec: TeamSpec;
  readonly signal: AbortSignal;
  readonly state: S;
  /** Starts one member job. Throws LimitReached once the budget or the agent bound is reached, InputError/SetupError for a bad member. */
  start(member: string, role: string, prompt: string, options?: { needsChannel?: boolean }): JobRecord;
  /** The job once it has finished (or as it is when the team is cancelled). */
  finished(job: JobRecord): Promise<JobRecord>;
  event: TeamReport;
  /** The task as every member gets it: the preset's instructions first. */
  brief(): string;
  /** Ends the members still running (the leader finished; a debate member is no longer needed). */
  cancelMembers(jobIds?: string[]): Promise<void>;
};

/** `note`: what the caller should know of a team that still succeeded (a member dropped out). */
export type TopologyOutcome = { ok: boolean; answer: string; error?: string; note?: string };

/** Where a team's state reports what its members did (the team's events). */
export type TeamReport = (kind: TeamEvent['kind'], text: string, jobId?: string) => void;

/** One tool a member gets on its channel besides ask_parent; the channel registers it for the member's session. */
type MemberTool<Shape extends z.ZodRawShape = z.ZodRawShape> = {
  name: string;
  description: string;
  inputSchema: Shape;
  /** Default: read-only and closed-world (src/mcp/channel/team-tools.ts). */
  annotations?: { readOnlyHint: boolean; openWorldHint: boolean };
  /** The tool's structured result; an InputError says what to change. */
  call(
    args: z.output<z.ZodObject<Shape>>,
    signal: AbortSignal,
  ): Record<string, unknown> | Promise<Record<string, unknown>>;
};

/** A member tool with its arguments typed by its schema. */
export const memberTool = <Shape extends z.ZodRawShape>(tool: MemberTool<Shape>): MemberTool => tool;

/** What the surface lends a member that runs teams of its own (supervisor_tree): run_team as the orchestrator's tool takes it. */
export type MemberTeams = {
  inputSchema: z.ZodRawShape;
  /** Starts a team from run_team's arguments, for `caller`, below the member's job. */
  start(
    args: Record<string, unknown>,
    from: { caller: string | undefined; parent: { teamId: string; jobId: string } },
  ): TeamRecord;
  waitFor(id: string, options: { timeoutMs: number; signal?: AbortSignal }): Promise<TeamRecord>;
  /** A team as a caller sees it (run_team's result). */
  result(team: TeamRecord): Record<string, unknown>;
};

/** One member's session on the channel: every call of its tools speaks for `jobId`. */
export type MemberSession<S = unknown> = {
  jobId: string;
  team: TeamRecord;
  state: S;
  teams: MemberTeams;
};

/**
 * A topology. Methods, not function properties: a topology of state S is listed among
 * topologies of unknown state (its methods are only ever called with its own state).
 */
export type Topology<S = unknown> = {
  /** run_team's `topology` value. */
  name: string;
  /** What run_team's description says it does: one sentence an orchestrating model acts on. */
  description: string;
  /**
   * Options only this topology takes (snake_case, as run_team's options name them; each lands on
   * TeamSpec in camelCase). Another topology's option with the same name must be the same schema.
   */
  options?: Record<string, z.ZodType>;
  /** What run_team's options description says of its options that its description does not. */
  optionsNote?: string;
  /** Why this spec cannot run (members of the wrong number), or undefined. */
  refuse?(spec: TeamSpec): string | undefined;
  /** How many agents it starts at most. */
  plannedAgents(spec: TeamSpec): number;
  /** Its members talk to their team over the channel, so each must be a CLI agent with ask_parent on. */
  channel?: boolean;
  /** Its members start teams of their own, so it cannot run at the deepest level of teams. */
  runsTeams?: boolean;
  /** What its members share while the team runs (a task list, a board), made for each team. */
  state?(report: TeamReport): S;
  /** The tools a member gets on its channel, bound to its session. */
  memberTools?(member: MemberSession<S>): MemberTool[];
  /**
   * How the dashboard draws the team (src/jobs/teams/view.ts); `state` is undefined for a team
   * another server ran or one read back after a restart. Default: one step per role.
   */
  view?(team: TeamRecord, state: S | undefined): TeamView;
  run(run: TeamRun<S>): Promise<TopologyOutcome>;
};
