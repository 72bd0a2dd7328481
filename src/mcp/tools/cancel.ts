// cancel: stop a queued or running agent, and its whole process group; or a team, and every member.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { App } from '../../app.js';
import { findJob, findTeam, toolResult } from '../views.js';
import { summarize } from '../../jobs/result.js';
import { TEAM_ID } from '../../jobs/teams/record.js';
import { jobOrTeamSummarySchema, summarizeTeam } from '../../jobs/teams/result.js';

export function registerCancelTool(server: McpServer, app: App): void {
  server.registerTool(
    'cancel',
    {
      title: 'Cancel agent',
      description: 'Stop a queued or running agent and all its processes.',
      inputSchema: z.object({ agent_id: z.string().min(1).max(64) }).strict(),
      outputSchema: jobOrTeamSummarySchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async ({ agent_id }) => {
      if (TEAM_ID.test(agent_id)) {
        findTeam(app, agent_id);
        return toolResult(summarizeTeam(app, (await app.teams.cancel(agent_id))!));
      }
      findJob(app, agent_id);
      const job = await app.jobs.cancel(agent_id);
      return toolResult(summarize(app, job!));
    },
  );
}
