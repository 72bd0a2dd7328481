// The MCP layer: a thin protocol surface over the app. One register function per tool.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { App } from './app.js';
import { registerJobNotifications, registerResources } from './resources.js';
import { registerCancelTool } from './tools/cancel.js';
import { registerListTool } from './tools/list.js';
import { registerLogsTool } from './tools/logs.js';
import { registerResultTool } from './tools/result.js';
import { registerSpawnTools } from './tools/spawn.js';
import { DEFAULT_WAIT_S, registerWaitTool } from './tools/wait.js';
import { VERSION } from './version.js';

export function instructions(app: App): string {
  const backends = app.backends.map((b) => {
    const a = app.availability(b);
    return `- spawn_${b.name}: ${a.usable ? 'usable' : `NOT usable here (${a.detail})`}`;
  });
  return [
    'polyspawn delegates tasks to other coding agents, which run in the background in parallel.',
    `spawn_<backend> returns an agent_id at once. wait_for_agents waits (up to ${DEFAULT_WAIT_S} s a call; call again while some are pending) and returns answers; result, list, logs and cancel manage agents.`,
    'Each agent sees only the prompt you give it: make it self-contained. Every run is recorded for audit (IAC.md in the project, and the run store); secrets are redacted.',
    'Backends:',
    ...backends,
  ].join('\n');
}

export function createServer(app: App): McpServer {
  const server = new McpServer(
    { name: 'polyspawn', version: VERSION },
    { instructions: instructions(app), capabilities: { tools: {}, logging: {} } },
  );
  registerSpawnTools(server, app);
  registerListTool(server, app);
  registerResultTool(server, app);
  registerWaitTool(server, app);
  registerCancelTool(server, app);
  registerLogsTool(server, app);
  registerResources(server, app);
  registerJobNotifications(server, app);
  return server;
}
