// reply_subagent: answer a question a running agent asked with ask_parent; the agent, blocked
// on it, carries on in the same run.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { App } from '../../app.js';
import { CONVERSATION_LIMITS } from '../../jobs/conversation.js';
import { jobSummarySchema, summarize } from '../../jobs/result.js';
import { findJob, toolResult } from '../views.js';

export function registerReplyTool(server: McpServer, app: App): void {
  server.registerTool(
    'reply_subagent',
    {
      title: 'Answer an agent',
      description: "Answer a running agent's question (from wait_for_agents' questions); it goes on at once.",
      inputSchema: z
        .object({
          agent_id: z.string().min(1).max(64),
          message_id: z.string().min(1).max(64),
          answer: z.string().min(1).max(CONVERSATION_LIMITS.answerChars),
        })
        .strict(),
      outputSchema: jobSummarySchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ agent_id, message_id, answer }) => {
      findJob(app, agent_id);
      return toolResult(summarize(app, app.jobs.reply(agent_id, message_id, answer)));
    },
  );
}
