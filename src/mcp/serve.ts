// `polyspawn serve`: MCP on stdio. stdout carries only JSON-RPC, every log line goes to stderr.
import { formatWithOptions } from 'node:util';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { createApp } from '../app.js';
import { lazyParentChannel } from './channel/index.js';
import { collectWhenIdle } from '../jobs/idle-gc.js';
import { killAllGroupsNow } from '../jobs/process/runner.js';
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
  let stopping = false;
  const shutdown = async (why: string) => {
    if (stopping) return;
    stopping = true;
    log(
      `shutting down (${why}): ending ${app.jobs.counts.running} running and ${app.jobs.counts.queued} queued agents`,
    );
    // Give each group its grace period, but never hang the exit on it.
    const deadline = new Promise((r) => setTimeout(r, app.config.killGraceMs + 2000).unref());
    await Promise.race([Promise.all([app.teams.shutdown(), app.jobs.shutdown()]), deadline]);
    killAllGroupsNow();
    // The jobs' final states are in the store; IAC.md gets them before the process ends.
    await app.iac.closeBeforeExit();
    process.exit(0);
  };
  process.stdin.once('end', () => void shutdown('stdin closed'));
  process.stdin.once('close', () => void shutdown('stdin closed'));
  process.stdout.on('error', () => void shutdown('stdout closed'));
  // `on`, not `once`: signal-exit (in proper-lockfile and write-file-atomic) re-raises a signal
  // when its handlers are the only ones left, which would kill the server mid-shutdown.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void shutdown(signal));
  process.once('exit', killAllGroupsNow);
  // The run store's history loads once the client has finished the handshake, so that a
  // long history never slows start-up (a tool call needing it first loads it at once).
  server.server.oninitialized = () => app.iac.start();
  setTimeout(() => app.iac.start(), 2000).unref();
  await server.connect(new StdioTransport());
  log(`${VERSION} serving on stdio for ${app.config.projectDir} (${app.backends.map((b) => b.name).join(', ')})`);
}

/**
 * stdout is the JSON-RPC stream: a library that logs with console.log, .info or .debug
 * (@hono/node-server, under the channel's HTTP transport, prints "The user aborted a request."
 * with console.info) would corrupt it. Their lines go to stderr instead.
 */
function keepConsoleOffStdout(): void {
  const toStderr = (...args: unknown[]) => void process.stderr.write(`${formatWithOptions({}, ...args)}\n`);
  console.log = console.info = console.debug = toStderr;
}
