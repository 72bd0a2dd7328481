// reply_subagent: answer a question a running agent asked with ask_parent; the agent, blocked
// on it, carries on in the same run.
import { z } from 'zod';
import { tool } from './tool.js';
import type { App } from '../../app.js';
import { CONVERSATION_LIMITS } from '../../jobs/conversation.js';
import { jobSummarySchema, summarize } from '../../jobs/result.js';
import { findJob } from '../views.js';

export const replyTool = (app: App) =>
  tool({
    name: 'reply_subagent',
    spawning: true,
    title: 'Answer an agent',
    description:
      "Answer a running agent's question (from wait_for_agents' questions); it goes on at once. The first answer wins (yours, the dashboard's, the user's in a task's dialog).",
    input: z
      .object({
        agent_id: z.string().min(1).max(64),
        message_id: z.string().min(1).max(64),
        answer: z.string().min(1).max(CONVERSATION_LIMITS.answerChars),
      })
      .strict(),
    output: jobSummarySchema,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    handler: async ({ agent_id, message_id, answer }) => {
      findJob(app, agent_id);
      return summarize(app, app.jobs.reply(agent_id, message_id, answer));
    },
  });
