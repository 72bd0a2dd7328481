// What a running agent gets on its channel: ask the orchestrator and wait for the answer, wait
// again for one already asked, say what it is doing. Each session is bound to the one job whose
// token opened it, so an agent can only ever speak for itself. The input schemas are strict: a
// key or an addressee the tool does not know is refused, naming it, rather than dropped (a
// question meant for the user must not reach someone else unmarked).
import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { App } from '../../app.js';
import { ADDRESSEES, ANSWER_WAIT_S, CONVERSATION_LIMITS as LIMITS } from '../../jobs/conversation.js';
import { VERSION } from '../../lib/version.js';
import { toolResult } from '../views.js';
import { registerTeamTools } from './team-tools.js';

const answerSchema = z.object({
  message_id: z.string(),
  status: z.enum(['answered', 'pending']).describe('pending: call check_message_status'),
  answer: z.string().optional(),
});

/** The MCP server one agent's session talks to. */
export function channelServer(app: App, jobId: string): McpServer {
  const server = new McpServer(
    { name: 'polyspawn-parent', version: VERSION },
    { instructions: 'The orchestrator that started you. Ask it when a decision is not yours to make.' },
  );
  const wait = (messageId: string, signal: AbortSignal) =>
    app.jobs.waitForAnswer(jobId, messageId, ANSWER_WAIT_S * 1000, signal);

  server.registerTool(
    'ask_parent',
    {
      description:
        `Ask the orchestrator a question, or with to: "user" the user it works for, and wait for the answer ` +
        `(up to ${ANSWER_WAIT_S} s; then status "pending").`,
      inputSchema: z.strictObject({
        question: z.string().min(1).max(LIMITS.questionChars),
        options: z
          .array(z.string().min(1).max(LIMITS.optionChars))
          .max(LIMITS.options)
          .optional()
          .describe('Choices to pick from'),
        to: z
          .enum(ADDRESSEES)
          .optional()
          .describe(
            '"orchestrator" (the default): the model that started you. "user": a decision only the user can make; ' +
              'their client shows it to them where it can, else the orchestrator passes it on',
          ),
      }),
      outputSchema: answerSchema,
      // It changes nothing the agent works on; and codex and copilot call read-only tools
      // without an approval nobody would give.
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ question, options, to }, ctx) => {
      const asked = app.jobs.ask(jobId, question, options, to);
      const answer = await wait(asked.messageId, ctx.mcpReq.signal);
      return toolResult({ message_id: asked.messageId, ...answer });
    },
  );

  server.registerTool(
    'check_message_status',
    {
      description: `Wait again (up to ${ANSWER_WAIT_S} s) for the answer to a question ask_parent left pending.`,
      inputSchema: z.strictObject({ message_id: z.string().min(1).max(64) }),
      outputSchema: answerSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ message_id }, ctx) => toolResult({ message_id, ...(await wait(message_id, ctx.mcpReq.signal)) }),
  );

  server.registerTool(
    'report_progress',
    {
      description: 'Tell the orchestrator in one line what you are doing now.',
      inputSchema: z.strictObject({ text: z.string().min(1).max(LIMITS.progressInputChars) }),
      outputSchema: z.object({ recorded: z.boolean() }),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ text }) => {
      app.jobs.reportProgress(jobId, text);
      return toolResult({ recorded: true });
    },
  );
  registerTeamTools(server, app, jobId);
  return server;
}
