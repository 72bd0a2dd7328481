// `polyspawn serve`: MCP on stdio. stdout carries only JSON-RPC, every log line goes to stderr.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { createApp } from '../app.js';
import { lazyParentChannel } from './channel/index.js';
import { collectWhenIdle } from '../jobs/idle-gc.js';
import { exitOnSignals, keepConsoleOffStdout } from './lifecycle.js';
import { VERSION } from '../lib/version.js';
import { createServer } from './server.js';

/**
 * The SDK's stdio transport, but every message that finds stdout full waits for the same 'drain'.
 * The SDK's own send adds one 'drain' listener per such message: answers that outrun the client
 * (a burst of results, progress notifications) pile up listeners on stdout, and Node warns of a
 * leak on stderr (MaxListenersExceededWarning) past ten.
 */
class StdioTransport extends StdioServerTransport {
  private drained: Promise<void> | undefined;

  override send(message: JSONRPCMessage): Promise<void> {
    if (process.stdout.write(serializeMessage(message))) return Promise.resolve();
    this.drained ??= new Promise((resolve) =>
      process.stdout.once('drain', () => {
        this.drained = undefined;
        resolve();
      }),
    );
    return this.drained;
  }
}

/** Serves one client until stdin or stdout closes or a signal comes; then ends the agents and the process. */
export async function serveStdio(log: (message: string) => void): Promise<void> {
  keepConsoleOffStdout();
  const app = createApp(process.env, process.cwd(), undefined, undefined, { parentChannel: lazyParentChannel });
  const server = createServer(app);
  collectWhenIdle(app.jobs);
  const shutdown = exitOnSignals(app, log);
  process.stdin.once('end', () => void shutdown('stdin closed'));
  process.stdin.once('close', () => void shutdown('stdin closed'));
  process.stdout.on('error', () => void shutdown('stdout closed'));
  // The run store's history loads once the client has finished the handshake, so that a
  // long history never slows start-up (a tool call needing it first loads it at once).
  server.server.oninitialized = () => app.iac.start();
  setTimeout(() => app.iac.start(), 2000).unref();
  await server.connect(new StdioTransport());
  log(`${VERSION} serving on stdio for ${app.config.projectDir} (${app.backends.map((b) => b.name).join(', ')})`);
}
