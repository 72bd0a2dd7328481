// A small MCP server over Streamable HTTP that plays polyspawn's `parent` channel for the contract
// tests: 127.0.0.1, a random port, `Authorization: Bearer <token>` required, one tool
// `ask_parent(question, options?)` that answers at once with a fixed answer as JSON text.
// Stateless (a fresh server and transport per POST); GET and DELETE get 405, which the transport
// spec allows and each CLI accepts.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface ParentCall {
  question: string;
  options?: string[] | undefined;
}

export interface ParentMcp {
  /** e.g. http://127.0.0.1:40123/mcp */
  url: string;
  token: string;
  /** Every ask_parent call, in order. */
  calls: ParentCall[];
  /** The headers of every authorised request (what a Host or Origin check will see). */
  headers: http.IncomingHttpHeaders[];
  close(): Promise<void>;
}

export const PARENT_ANSWER = 'blue';

/** `readOnlyHint`: annotate ask_parent as read-only (codex and copilot then run it without being allowed). */
export async function startParentMcp(token: string, options: { readOnlyHint?: boolean } = {}): Promise<ParentMcp> {
  const sockets = new Set<Socket>();
  const state: Omit<ParentMcp, 'url' | 'close'> = { token, calls: [], headers: [] };

  const mcpServer = (): McpServer => {
    const server = new McpServer({ name: 'parent', version: '0.0.0' });
    server.registerTool(
      'ask_parent',
      {
        description: 'Ask the orchestrator a question and wait for its answer.',
        inputSchema: { question: z.string(), options: z.array(z.string()).optional() },
        ...(options.readOnlyHint ? { annotations: { readOnlyHint: true } } : {}),
      },
      ({ question, options: choices }) => {
        state.calls.push({ question, options: choices });
        const answer = { message_id: `m${state.calls.length}`, status: 'answered', answer: PARENT_ANSWER };
        return { content: [{ type: 'text', text: JSON.stringify(answer) }] };
      },
    );
    return server;
  };

  const httpServer = http.createServer((req, res) => {
    if (req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' });
      res.end(JSON.stringify({ error: 'unauthorized' }));
      return;
    }
    state.headers.push(req.headers);
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const server = mcpServer();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => void server.close());
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(400).end();
      else res.destroy();
    });
  });
  httpServer.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  const { port } = httpServer.address() as AddressInfo;

  return Object.assign(state, {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  });
}
