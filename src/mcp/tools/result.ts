// result: the full outcome of one agent or team, or its progress while it runs.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { App } from '../../app.js';
import { brief } from '../tool-list.js';
import { findJob, findTeam, toolResult } from '../views.js';
import { fullResult } from '../../jobs/result.js';
import { TEAM_ID } from '../../jobs/teams/record.js';
import { jobOrTeamResultSchema, teamResult } from '../../jobs/teams/result.js';

export function registerResultTool(server: McpServer, app: App): void {
  server.registerTool(
    'result',
    {
      title: 'Agent result',
      description:
        "One agent's answer, error, session_id, tokens and cost; while it runs, its state and newest output. Does not wait.",
      inputSchema: z
        .object({
          agent_id: z.string().min(1).max(64),
          include_raw: brief(z.boolean().optional().describe("Also the CLI's own final record"), ''),
        })
        .strict(),
      outputSchema: jobOrTeamResultSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ agent_id, include_raw }) =>
      toolResult(
        TEAM_ID.test(agent_id)
          ? teamResult(app, findTeam(app, agent_id), (id) => app.jobs.get(id))
          : fullResult(app, findJob(app, agent_id), { includeRaw: include_raw ?? false }),
      ),
  );
}
