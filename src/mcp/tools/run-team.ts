// run_team: several agents on one task in one of the topologies (src/jobs/teams/topologies/);
// returns a team_id at once (as an MCP task, the task reports the team). Its description says
// what each topology does, as each declares it.
import { z } from 'zod';
import { tool, type ToolCall } from './tool.js';
import type { App } from '../../app.js';
import { teamResult, teamResultSchema } from '../../jobs/teams/result.js';
import { teamOptionsSchema, TOPOLOGY_NAMES } from '../../jobs/teams/options.js';
import { startTeam } from '../../jobs/teams/start.js';
import { MEMBER_PATTERN, TEAM_LIMITS } from '../../jobs/teams/spec.js';
import { topologies } from '../../jobs/teams/topologies/registry.js';
import { brief } from '../tool-list.js';

const optionsText = `See the topologies; also ${[
  ...topologies.flatMap((t) => t.optionsNote ?? []),
  "max_budget_usd (the team's)",
  'max_turns',
  'timeout_s',
  "isolation (each member's)",
].join(', ')}`;

const topologiesText = topologies.map((t) => `${t.name}: ${t.description}`).join(' ');

export const runTeamInput = z
  .object({
    task: z.string().min(1).max(TEAM_LIMITS.taskChars),
    topology: z.enum(TOPOLOGY_NAMES).optional(),
    members: brief(
      z
        .array(z.string().regex(MEMBER_PATTERN))
        .min(1)
        .max(TEAM_LIMITS.members)
        .optional()
        .describe('Backends or named agents, each optionally with a model: "<name>:<model>"'),
      { type: 'array', items: { type: 'string' }, description: 'Backends or named agents ("<name>:<model>")' },
    ),
    team: z.string().min(1).max(48).optional().describe('A preset: .polyspawn/teams/<name>.md'),
    options: brief(
      teamOptionsSchema.omit({ topology: true, members: true }).partial().optional().describe(optionsText),
      // Named, not each option's schema (the tools/list budget).
      { type: 'object', description: optionsText },
    ),
  })
  .strict();

export const runTeamTool = (app: App) => {
  const start = (args: z.output<typeof runTeamInput>, call: ToolCall) => startTeam(app, args, { caller: call.caller });
  return tool({
    name: 'run_team',
    title: 'Run a team of agents',
    description:
      `One task, several agents; returns a team_id at once. Topologies: ${topologiesText} ` +
      `At most ${app.config.teamMaxAgents} agents a team, its supervisor's teams included.`,
    input: runTeamInput,
    output: teamResultSchema,
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    spawning: true,
    handler: (args, call) => teamResult(app, start(args, call), (id) => app.jobs.get(id)),
    start: (args, call) => ({ kind: 'team', id: start(args, call).id }),
  });
};
