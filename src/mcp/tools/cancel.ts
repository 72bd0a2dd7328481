// cancel: stop a queued or running agent, and its whole process group.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { App } from '../../app.js';
import { findJob, toolResult } from '../views.js';
import { jobSummarySchema, summarize } from '../../jobs/result.js';

export function registerCancelTool(server: McpServer, app: App): void {
  server.registerTool(
    'cancel',
    {
      title: 'Cancel agent',
      description: 'Stop a queued or running agent and all its processes.',
      inputSchema: z.object({ agent_id: z.string().min(1).max(64) }).strict(),
      outputSchema: jobSummarySchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async ({ agent_id }) => {
      findJob(app, agent_id);
      const job = await app.jobs.cancel(agent_id);
      return toolResult(summarize(app, job!));
    },
  );
}
