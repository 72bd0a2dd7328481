// run_team: several agents on one task in one of the topologies (src/jobs/teams/topologies/);
// returns a team_id at once. Its description says what each topology does, as each declares it.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { App } from '../../app.js';
import { InputError } from '../../lib/errors.js';
import { presetFor, presetsDir } from '../../jobs/teams/presets.js';
import { teamResult, teamResultSchema } from '../../jobs/teams/result.js';
import { checkTeamOptions, teamOptionsSchema, teamSpec, TOPOLOGY_NAMES } from '../../jobs/teams/options.js';
import { MEMBER_PATTERN, TEAM_LIMITS } from '../../jobs/teams/spec.js';
import { topologies } from '../../jobs/teams/topologies/registry.js';
import type { TeamRecord } from '../../jobs/teams/record.js';
import { brief } from '../tool-list.js';
import { toolResult } from '../views.js';

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

type RunTeamArgs = z.infer<typeof runTeamInput>;

/** The team a run_team call asks for, a preset's settings under the call's own. */
export function startTeam(
  app: App,
  args: RunTeamArgs,
  from: { caller: string | undefined; parent?: { teamId: string; jobId: string } },
): TeamRecord {
  const preset = args.team ? presetFor(presetsDir(app.config.agentsDir), args.team) : undefined;
  const topology = args.topology ?? preset?.options.topology;
  const members = args.members ?? preset?.options.members;
  if (!topology || !members)
    throw new InputError('run_team needs a topology and members (or team: the name of a preset that sets them)');
  const options = checkTeamOptions({ ...preset?.options, ...args.options, topology, members });
  return app.teams.start(
    teamSpec(options, args.task, {
      preset: preset?.name,
      instructions: preset?.instructions || undefined,
      caller: from.caller,
      parent: from.parent,
    }),
  );
}

export function registerRunTeamTool(server: McpServer, app: App): void {
  server.registerTool(
    'run_team',
    {
      title: 'Run a team of agents',
      description:
        `One task, several agents; returns a team_id at once. Topologies: ${topologiesText} ` +
        `At most ${app.config.teamMaxAgents} agents a team, its supervisor's teams included.`,
      inputSchema: runTeamInput,
      outputSchema: teamResultSchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    async (args) =>
      toolResult(
        teamResult(app, startTeam(app, args, { caller: server.server.getClientVersion()?.name }), (id) =>
          app.jobs.get(id),
        ),
      ),
  );
}
