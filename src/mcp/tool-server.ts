// The one registration loop: tools/list and tools/call served from the declared tools
// (src/mcp/tools/*, each one object), for either protocol era. A call is checked against the
// tool's full zod schema, its handler given a ToolCall (caller, signal, progress), and its
// structured result returned as MCP's tool result (views.ts). A call to a tool that can run as a
// task and that declares the tasks extension starts the work and answers a task handle (tasks.ts).
// Every failure is a tool result with isError and a message that says what to change: the
// client's model reads it, and the server keeps serving.
import type { CallToolResult, McpServer, ServerContext } from '@modelcontextprotocol/server';
import type { z } from 'zod';
import type { App } from '../app.js';
import { createTask, declaresTasks } from './tasks.js';
import { listedOutputOf, listedTool } from './tool-list.js';
import type { ToolCall, ToolDeclaration } from './tools/tool.js';
import { toolResult } from './views.js';

/** Tools that come and go (the named agents'): the current list, and a way to hear that it changed. */
export type ToolSource = {
  tools(): ToolDeclaration[];
  onChange?(listener: () => void): () => void;
};

const CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';

const failed = (text: string): CallToolResult => ({ isError: true, content: [{ type: 'text', text }] });

/** Each problem of the arguments on a line, with where it is: "Unrecognized key: x", "… at budget.max_turns". */
const issuesText = (error: z.ZodError) =>
  error.issues.map((i) => (i.path.length ? `${i.message} at ${i.path.join('.')}` : i.message)).join('\n');

/** What a handler gets of the SDK's request context. */
function toolCall(server: McpServer, ctx: ServerContext): ToolCall {
  const token = ctx.mcpReq._meta?.progressToken;
  return {
    // A 2026 request names its client in its envelope; a 2025 session, in its initialize.
    caller:
      (ctx.mcpReq.envelope as Record<string, { name?: string }> | undefined)?.[CLIENT_INFO]?.name ??
      server.server.getClientVersion()?.name,
    signal: ctx.mcpReq.signal,
    ...(token !== undefined
      ? {
          progress: (update) =>
            void ctx.mcpReq
              .notify({ method: 'notifications/progress', params: { progressToken: token, ...update } })
              .catch(() => undefined),
        }
      : {}),
    ...(ctx.sessionId ? { waiter: ctx.sessionId } : {}),
  };
}

/**
 * Serves the tools of `sources` on the server. `refusal`: why this server starts no agents (a
 * nested polyspawn), said to a spawn_* call instead of "not found". Returns what stops following
 * the sources (the server closed).
 */
export function serveTools(server: McpServer, app: App, sources: ToolSource[], refusal?: string): () => void {
  const inner = server.server;
  inner.registerCapabilities({ tools: { listChanged: true } });
  const all = () => sources.flatMap((source) => source.tools());
  inner.setRequestHandler('tools/list', () => ({ tools: all().map((tool) => listedTool(tool, app.env)) }));
  inner.setRequestHandler('tools/call', async (request, ctx) => {
    const { name, arguments: args } = request.params;
    const tool = all().find((t) => t.name === name);
    if (!tool) {
      return refusal && name.startsWith('spawn_')
        ? failed(`${name} refused: this polyspawn starts no agents, because ${refusal}.`)
        : failed(`Tool ${name} not found: call tools/list for the tools this server has`);
    }
    const parsed = tool.input.safeParse(args ?? {});
    if (!parsed.success)
      return failed(`Input validation error: Invalid arguments for tool ${name}: ${issuesText(parsed.error)}`);
    const call = toolCall(server, ctx);
    try {
      if (tool.start && declaresTasks(ctx.mcpReq.envelope, ctx.mcpReq._meta)) {
        // A task handle is not a CallToolResult in the SDK's types: the 2026-07-28 result
        // vocabulary of tools/call lets it through (resultType "task").
        return createTask(app, tool.start(parsed.data, call)) as unknown as CallToolResult;
      }
      const structured = await tool.handler(parsed.data, call);
      return inner.projectCallToolResult(toolResult(structured), listedOutputOf(tool));
    } catch (error) {
      return failed(error instanceof Error ? error.message : String(error));
    }
  });
  const stops = sources.flatMap((source) =>
    source.onChange ? [source.onChange(() => void inner.sendToolListChanged().catch(() => undefined))] : [],
  );
  return () => {
    for (const stop of stops) stop();
  };
}
