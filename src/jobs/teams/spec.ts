// What a team is asked to do (TeamSpec), the limits and options every topology shares, and a
// supervisor's child team within its parent's limits. The options as a whole, and their checks,
// are derived from the topologies in options.ts.
import { z } from 'zod';
import { InputError } from '../../lib/errors.js';
import { maxBudgetUsdSchema, maxTurnsSchema } from '../budget.js';

export const TEAM_LIMITS = {
  members: 12,
  items: 100,
  /** Debate and blackboard rounds. */
  rounds: 10,
  taskChars: 200_000,
  instructionsChars: 20_000,
} as const;

/** A member: a backend (`codex`) or a named agent (`reviewer`), either with a model (`claude:opus`). */
export const MEMBER_PATTERN = /^[a-z][a-z0-9_-]{0,47}(:[A-Za-z0-9._/@-]{1,100})?$/;

/** An option that names a member (reduce_with, judge): the team table checks it before the team starts. */
export const memberOption = z.string().regex(MEMBER_PATTERN);
/** Debate and blackboard rounds. */
export const roundsOption = z.number().int().min(1).max(TEAM_LIMITS.rounds);

/** What every team takes, whatever its topology: its members and the limits each member runs within. */
export const commonOptions = {
  members: z.array(memberOption).min(1).max(TEAM_LIMITS.members),
  max_budget_usd: maxBudgetUsdSchema().optional(),
  max_turns: maxTurnsSchema().optional(),
  timeout_s: z.number().int().min(1).max(86_400).optional(),
  isolation: z.enum(['none', 'worktree']).optional(),
};

/** A team as it runs: the options checked, the task, and what a preset adds. */
export type TeamSpec = {
  /** A name in topologies/registry.ts (checked by the options schema). */
  topology: string;
  task: string;
  members: string[];
  /** map_reduce: one item of the list to each member job (round robin over the members). */
  items?: string[];
  reduceWith?: string;
  judge?: string;
  rounds?: number;
  onFailure?: 'stop' | 'continue';
  maxBudgetUsd?: number;
  maxTurns?: number;
  timeoutS?: number;
  /** "worktree": each CLI member works in a git worktree of its own, from HEAD (src/jobs/worktree/). */
  isolation?: 'none' | 'worktree';
  /** A preset's body: instructions every member gets before the task. */
  instructions?: string;
  preset?: string;
  /**
   * The MCP client that ran the team (its initialize name), for whom its members are spawned (a
   * named agent's allowed_callers). A supervisor's child team runs for the client of its root
   * team: a supervisor may use only the agents the client that started it may.
   */
  caller?: string;
  /** supervisor_tree: the supervisor job (and its team) that started this team. */
  parent?: { teamId: string; jobId: string };
};

export const DEFAULT_ROUNDS = 2;

/** `claude:opus` → { name: 'claude', model: 'opus' }. */
export function parseMember(ref: string): { name: string; model?: string } {
  const colon = ref.indexOf(':');
  return colon < 0 ? { name: ref } : { name: ref.slice(0, colon), model: ref.slice(colon + 1) };
}

/**
 * A supervisor's child team within its parent's limits: what it leaves out it inherits (budget,
 * max_turns, timeout_s, isolation), and it may narrow them, never widen (an InputError says which).
 * The budget is also drawn from the parent's: the team table counts a tree's spending against
 * every budget above it.
 */
export function childSpec(parent: TeamSpec, child: TeamSpec): TeamSpec {
  const narrowed = { ...child };
  const within = (field: 'maxBudgetUsd' | 'maxTurns' | 'timeoutS', option: string) => {
    const ceiling = parent[field];
    if (ceiling === undefined) return;
    const asked = child[field];
    if (asked !== undefined && asked > ceiling)
      throw new InputError(
        `options.${option} ${asked} is over the ${option} of the team that runs you (${ceiling}): pass at most ${ceiling}, or leave it out`,
      );
    narrowed[field] = asked ?? ceiling;
  };
  within('maxBudgetUsd', 'max_budget_usd');
  within('maxTurns', 'max_turns');
  within('timeoutS', 'timeout_s');
  if (parent.isolation === 'worktree') {
    if (child.isolation === 'none')
      throw new InputError(
        'options.isolation "none": the team that runs you works in worktrees, so yours does too: leave isolation out',
      );
    narrowed.isolation = 'worktree';
  }
  return narrowed;
}
