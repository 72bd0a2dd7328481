// What a caller asks of a team (run_team, or a preset in .polyspawn/teams/<name>.md): the
// topology, the members, the task and the topology's options, checked before anything starts.
// Everything here is derived from the topologies' declarations (topologies/registry.ts).
import { z } from 'zod';
import { InputError } from '../../lib/errors.js';
import { commonOptions, memberOption, type TeamSpec } from './spec.js';
import type { Topology } from './topology.js';
import { topologies } from './topologies/registry.js';

/** Every topology's name, in the registry's order (run_team's enum and description). */
export const TOPOLOGY_NAMES = topologies.map((t) => t.name) as [string, ...string[]];

/** The topology of a checked spec (its name was checked against the registry). */
export function topologyNamed(name: string): Topology {
  const topology = topologies.find((t) => t.name === name);
  if (!topology) throw new InputError(`no topology "${name}": use one of ${TOPOLOGY_NAMES.join(', ')}`);
  return topology;
}

/** The topologies' own options, in their order; an option two topologies share must be one schema. */
export function ownOptions(list: readonly Topology[]): Record<string, z.ZodType> {
  const shape: Record<string, z.ZodType> = {};
  const declaredBy = new Map<string, string>();
  for (const topology of list)
    for (const [name, schema] of Object.entries(topology.options ?? {})) {
      if (shape[name] && shape[name] !== schema)
        throw new Error(
          `topology ${topology.name} declares option ${name}, which ${declaredBy.get(name)} declared with another schema: ` +
            'share one schema (as rounds does: roundsOption in spec.ts) or give the option another name',
        );
      shape[name] = schema;
      declaredBy.set(name, topology.name);
    }
  return shape;
}

const topologyOptions = ownOptions(topologies);

/** Which topologies take an option of their own. */
const takers = (option: string) => topologies.filter((t) => option in (t.options ?? {})).map((t) => t.name);

const optional = (shape: Record<string, z.ZodType>): Record<string, z.ZodOptional<z.ZodType>> =>
  Object.fromEntries(Object.entries(shape).map(([name, schema]) => [name, schema.optional()]));

const { members, ...limits } = commonOptions;
export const teamOptionsSchema = z
  .object({
    topology: z.enum(TOPOLOGY_NAMES),
    members,
    ...optional(topologyOptions),
    ...limits,
  })
  .strict();
/** The options checked; a topology's own options by their names (their types are TeamSpec's fields). */
export type TeamOptions = z.infer<typeof teamOptionsSchema> & { [option: string]: unknown };

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

/** `reduce_with` → `reduceWith`: where a topology's option lands on TeamSpec. */
const specField = (option: string) => option.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** The spec of checked options, or an InputError that says what to change. */
export function teamSpec(options: TeamOptions, task: string, extra: Partial<TeamSpec> = {}): TeamSpec {
  const topology = topologyNamed(options.topology);
  const refuse = (why: string): never => {
    throw new InputError(`${topology.name}: ${why}`);
  };
  const own: Record<string, unknown> = {};
  let misplaced: string | undefined;
  for (const option of Object.keys(topologyOptions)) {
    const value = options[option];
    if (value === undefined) continue;
    const takenBy = takers(option);
    if (!takenBy.includes(topology.name)) misplaced ??= `${option} applies to ${takenBy.join(' and ')} only`;
    own[specField(option)] = value;
  }
  const spec: TeamSpec = {
    topology: topology.name,
    task,
    members: options.members,
    // Each value was checked by its topology's schema, which is what TeamSpec types its field as.
    ...(own as Partial<TeamSpec>),
    maxBudgetUsd: options.max_budget_usd,
    maxTurns: options.max_turns,
    timeoutS: options.timeout_s,
    isolation: options.isolation,
    ...extra,
  };
  // The members first: a topology given the wrong number of them is told so before its options.
  const why = topology.refuse?.(spec) ?? misplaced;
  if (why) refuse(why);
  return spec;
}

/** Every member a spec names: its members, and the options declared as a member (`memberOption`: reduce_with, judge). */
export function namedMembers(spec: TeamSpec): string[] {
  const fields: Record<string, unknown> = spec;
  const named = Object.entries(topologyOptions)
    .filter(([, schema]) => schema === memberOption)
    .map(([option]) => fields[specField(option)])
    .filter((m): m is string => typeof m === 'string');
  return [...new Set([...spec.members, ...named])];
}
