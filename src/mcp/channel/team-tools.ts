// What a team's member gets on its channel besides ask_parent: the tools its topology declares
// (src/jobs/teams/topologies/), bound to the member whose token opened the session, so that each
// call speaks for it.
import type { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { App } from '../../app.js';
import { topologyNamed } from '../../jobs/teams/options.js';
import { teamResult } from '../../jobs/teams/result.js';
import type { MemberTeams } from '../../jobs/teams/topology.js';
import { startTeam } from '../../jobs/teams/start.js';
import { runTeamInput } from '../tools/run-team.js';
import { toolResult } from '../views.js';

/** A member tool's default: it changes nothing the agent works on, so the CLIs call it without an approval. */
const READ_ONLY = { readOnlyHint: true, openWorldHint: false } as const;

export function registerTeamTools(server: McpServer, app: App, jobId: string): void {
  const membership = app.teams.teamOf(jobId);
  if (!membership) return;
  const { team, state } = membership;
  const teams: MemberTeams = {
    inputSchema: runTeamInput.shape,
    // The SDK checked the arguments against the same schema; parsed again here for their type.
    start: (args, from) => startTeam(app, runTeamInput.parse(args), from),
    waitFor: (id, options) => app.teams.waitFor(id, options),
    result: (child) => teamResult(app, child, (id) => app.jobs.get(id)),
  };
  for (const tool of topologyNamed(team.spec.topology).memberTools?.({ jobId, team, state, teams }) ?? [])
    server.registerTool(
      tool.name,
      {
        description: tool.description,
        inputSchema: z.strictObject(tool.inputSchema),
        annotations: tool.annotations ?? READ_ONLY,
      },
      async (args, ctx) => toolResult(await tool.call(args, ctx.mcpReq.signal)),
    );
}
