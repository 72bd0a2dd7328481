// The run_team use case: the team a call asks for, a preset's settings under the call's own,
// checked and started. The MCP tool, a supervisor's member tool and a task all start teams here.
import type { Config } from '../../config/config.js';
import { InputError } from '../../lib/errors.js';
import { checkTeamOptions, teamSpec, type TeamOptions } from './options.js';
import { presetFor, presetsDir } from './presets.js';
import type { TeamRecord } from './record.js';
import type { TeamTable } from './table.js';

/** A run_team call's arguments. */
type TeamRequest = {
  task: string;
  topology?: string;
  members?: string[];
  /** A preset's name: .polyspawn/teams/<name>.md. */
  team?: string;
  options?: Partial<TeamOptions>;
};

export function startTeam(
  app: { config: Pick<Config, 'agentsDir'>; teams: Pick<TeamTable, 'start'> },
  request: TeamRequest,
  from: { caller: string | undefined; parent?: { teamId: string; jobId: string } },
): TeamRecord {
  const preset = request.team ? presetFor(presetsDir(app.config.agentsDir), request.team) : undefined;
  const topology = request.topology ?? preset?.options.topology;
  const members = request.members ?? preset?.options.members;
  if (!topology || !members)
    throw new InputError('run_team needs a topology and members (or team: the name of a preset that sets them)');
  const options = checkTeamOptions({ ...preset?.options, ...request.options, topology, members });
  return app.teams.start(
    teamSpec(options, request.task, {
      preset: preset?.name,
      instructions: preset?.instructions || undefined,
      caller: from.caller,
      parent: from.parent,
    }),
  );
}
