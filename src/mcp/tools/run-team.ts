// run_team: several agents on one task in one of six topologies (src/jobs/teams/); returns a
// team_id at once. What each topology does is said once, in the server's instructions.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { App } from '../../app.js';
import { InputError } from '../../lib/errors.js';
import { presetFor, presetsDir } from '../../jobs/teams/presets.js';
import { teamResult, teamResultSchema } from '../../jobs/teams/result.js';
import {
  checkTeamOptions,
  MEMBER_PATTERN,
  TEAM_LIMITS,
  teamOptionsSchema,
  teamSpec,
  TOPOLOGIES,
} from '../../jobs/teams/spec.js';
import type { TeamRecord } from '../../jobs/teams/record.js';
import { brief } from '../tool-list.js';
import { toolResult } from '../views.js';
import { waitWithProgress, type Extra } from './wait.js';

const optionKeys = teamOptionsSchema.keyof().options.filter((k) => k !== 'topology' && k !== 'members');

export const runTeamInput = z
  .object({
    task: z.string().min(1).max(TEAM_LIMITS.taskChars),
    topology: z.enum(TOPOLOGIES).optional(),
    members: brief(
      z
        .array(z.string().regex(MEMBER_PATTERN))
        .min(1)
        .max(TEAM_LIMITS.members)
        .optional()
        .describe('Backends or named agents, optionally with a model: ["codex", "reviewer", "claude:opus"]'),
      { type: 'array', items: { type: 'string' }, description: 'Backends or named agents ("claude:opus")' },
    ),
    team: brief(z.string().min(1).max(48).optional().describe('A preset: .polyspawn/teams/<name>.md'), 'A preset'),
    options: brief(
      teamOptionsSchema
        .omit({ topology: true, members: true })
        .partial()
        .optional()
        .describe(`The topology's options: ${optionKeys.join(', ')}`),
      { type: 'object', description: optionKeys.join(', ') },
    ),
    wait_s: brief(
      z.number().min(0).max(3600).optional().describe('Wait up to this long and return the result if done'),
      '',
    ),
  })
  .strict();

type RunTeamArgs = z.infer<typeof runTeamInput>;

/** The team a run_team call asks for, a preset's settings under the call's own. */
export function startTeam(app: App, args: RunTeamArgs, parent?: { teamId: string; jobId: string }): TeamRecord {
  const preset = args.team ? presetFor(presetsDir(app.config.agentsDir), args.team) : undefined;
  const topology = args.topology ?? preset?.options.topology;
  const members = args.members ?? preset?.options.members;
  if (!topology || !members)
    throw new InputError('run_team needs a topology and members (or team: the name of a preset that sets them)');
  const options = checkTeamOptions({ ...preset?.options, ...args.options, topology, members });
  return app.teams.start(
    teamSpec(options, args.task, {
      ...(preset ? { preset: preset.name, ...(preset.instructions ? { instructions: preset.instructions } : {}) } : {}),
      ...(parent ? { parent } : {}),
    }),
  );
}

export async function teamAnswer(app: App, team: TeamRecord, waitS: number | undefined, extra: Extra) {
  // It returns early if a member asks the orchestrator something.
  if (waitS && team.state === 'running') await waitWithProgress(app, [], waitS, 'all', extra, [team.id]);
  return toolResult(teamResult(app, app.teams.get(team.id)!, (id) => app.jobs.get(id)));
}

export function registerRunTeamTool(server: McpServer, app: App): void {
  server.registerTool(
    'run_team',
    {
      title: 'Run a team of agents',
      description:
        'Runs several agents on one task in a topology (the instructions say each); returns a team_id at once. wait_for_agents, result and cancel take it.',
      inputSchema: runTeamInput,
      outputSchema: teamResultSchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    async (args, extra) => teamAnswer(app, startTeam(app, args), args.wait_s, extra),
  );
}
