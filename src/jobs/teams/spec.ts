// What a caller asks of a team (run_team, or a preset in .polyspawn/teams/<name>.md): the
// topology, the members, the task and the topology's options, checked before anything starts.
import { z } from 'zod';
import { InputError } from '../../lib/errors.js';
import { maxBudgetUsdSchema, maxTurnsSchema } from '../budget.js';

export const TOPOLOGIES = [
  'map_reduce',
  'pipeline',
  'peer_ring',
  'leader_teammate',
  'blackboard',
  'supervisor_tree',
] as const;
export type Topology = (typeof TOPOLOGIES)[number];

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

export const teamOptionsSchema = z
  .object({
    topology: z.enum(TOPOLOGIES),
    members: z.array(z.string().regex(MEMBER_PATTERN)).min(1).max(TEAM_LIMITS.members),
    items: z.array(z.string().min(1).max(TEAM_LIMITS.taskChars)).min(1).max(TEAM_LIMITS.items).optional(),
    reduce_with: z.string().regex(MEMBER_PATTERN).optional(),
    judge: z.string().regex(MEMBER_PATTERN).optional(),
    rounds: z.number().int().min(1).max(TEAM_LIMITS.rounds).optional(),
    on_failure: z.enum(['stop', 'continue']).optional(),
    max_budget_usd: maxBudgetUsdSchema().optional(),
    max_turns: maxTurnsSchema().optional(),
    timeout_s: z.number().int().min(1).max(86_400).optional(),
    isolation: z.enum(['none', 'worktree']).optional(),
  })
  .strict();
export type TeamOptions = z.infer<typeof teamOptionsSchema>;

/** Options as a caller or a preset gave them, checked: an InputError names the option and what is wrong. */
export function checkTeamOptions(raw: unknown): TeamOptions {
  const parsed = teamOptionsSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const where = issue.path.join('.');
  const known =
    where === '' && issue.code === 'unrecognized_keys'
      ? ` (the options are: ${Object.keys(teamOptionsSchema.shape).join(', ')})`
      : '';
  throw new InputError(`${where ? `${where}: ` : ''}${issue.message}${known}`);
}

/** A team as it runs: the options checked, the task, and what a preset adds. */
export type TeamSpec = {
  topology: Topology;
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

/** The spec of checked options, or an InputError that says what to change. */
export function teamSpec(options: TeamOptions, task: string, extra: Partial<TeamSpec> = {}): TeamSpec {
  const { topology, members } = options;
  const refuse = (why: string): never => {
    throw new InputError(`${topology}: ${why}`);
  };
  if (topology === 'pipeline' && members.length < 2)
    refuse('a pipeline needs at least two stages (members, in order); for one agent, call its spawn tool');
  if (topology === 'peer_ring' && members.length < 2) refuse('a debate needs at least two members');
  if (topology === 'leader_teammate' && members.length < 2)
    refuse('members: the leader first, then at least one teammate');
  if (topology === 'supervisor_tree' && members.length !== 1)
    refuse('members: exactly one supervisor (a CLI agent, which may run a team of its own)');
  const only = (field: keyof TeamOptions, topologies: Topology[]) => {
    if (options[field] !== undefined && !topologies.includes(topology))
      refuse(`${field} applies to ${topologies.join(' and ')} only`);
  };
  only('items', ['map_reduce']);
  only('reduce_with', ['map_reduce']);
  only('judge', ['peer_ring']);
  only('rounds', ['peer_ring', 'blackboard']);
  only('on_failure', ['pipeline']);
  return {
    topology,
    task,
    members,
    ...(options.items ? { items: options.items } : {}),
    ...(options.reduce_with ? { reduceWith: options.reduce_with } : {}),
    ...(options.judge ? { judge: options.judge } : {}),
    ...(options.rounds ? { rounds: options.rounds } : {}),
    ...(options.on_failure ? { onFailure: options.on_failure } : {}),
    ...(options.max_budget_usd ? { maxBudgetUsd: options.max_budget_usd } : {}),
    ...(options.max_turns ? { maxTurns: options.max_turns } : {}),
    ...(options.timeout_s ? { timeoutS: options.timeout_s } : {}),
    ...(options.isolation ? { isolation: options.isolation } : {}),
    ...extra,
  };
}

/** `claude:opus` → { name: 'claude', model: 'opus' }. */
export function parseMember(ref: string): { name: string; model?: string } {
  const colon = ref.indexOf(':');
  return colon < 0 ? { name: ref } : { name: ref.slice(0, colon), model: ref.slice(colon + 1) };
}

/** How many agents a team of fixed shape starts at most (a supervisor's own team is counted when it starts). */
export function plannedAgents(spec: TeamSpec): number {
  const members = spec.members.length;
  const rounds = spec.rounds ?? DEFAULT_ROUNDS;
  switch (spec.topology) {
    case 'map_reduce':
      return (spec.items?.length ?? members) + (spec.reduceWith ? 1 : 0);
    case 'peer_ring':
      return members * rounds + (spec.judge ? 1 : 0);
    case 'blackboard':
      return members * rounds;
    case 'pipeline':
    case 'leader_teammate':
      return members;
    case 'supervisor_tree':
      return 1;
  }
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
