// `polyspawn serve`: MCP on stdio. stdout carries only JSON-RPC, every log line goes to stderr.
// When the project's shared server (`serve --http`, the daemon) runs, its client is relayed to it
// (bridge.ts) instead: one job table for every client of the project.
import { backends } from '../../backends/registry.js';
import { createApp } from '../app.js';
import { loadConfig, projectDaemonOf } from '../config/config.js';
import { DEPTH_ENV, NESTING_ENV } from '../jobs/agents/nesting.js';
import { ancestorVariables } from '../lib/proc.js';
import { projectToken, type DaemonInfo } from '../lib/daemon-file.js';
import { serveStdio as serveStdioEntry } from '@modelcontextprotocol/server/stdio';
import { StdioTransport } from './stdio-transport.js';
import { lazyParentChannel } from './channel/index.js';
import { collectWhenIdle } from '../jobs/idle-gc.js';
import { exitOnSignals, keepConsoleOffStdout } from './lifecycle.js';
import { VERSION } from '../lib/version.js';
import { createServer } from './server.js';

/** Serves one client until stdin or stdout closes or a signal comes; then ends the agents and the process. */
export async function serveStdio(log: (message: string) => void): Promise<void> {
  keepConsoleOffStdout();
  const daemon = sharedServer(log);
  // The relay (and the SDK client it is built on) loads only when there is a daemon to relay to.
  if (daemon) return (await import('./bridge.js')).bridgeStdio(daemon.daemon, daemon.endpoint, daemon.token, log);
  const app = createApp(process.env, process.cwd(), undefined, undefined, { parentChannel: lazyParentChannel });
  collectWhenIdle(app.jobs);
  const shutdown = exitOnSignals(app, log);
  // Closed for any reason (stdin's end or error, stdout gone): the same shutdown as a signal's.
  const transport = new StdioTransport(() => void shutdown('the client closed stdio'));
  // The SDK's entry answers either era: a 2025 client's initialize, or a 2026 client's
  // server/discover (a probe it may abandon for initialize: then a second server is built).
  await serveStdioEntry(
    ({ era }) => {
      // A 2026 client hears changes on its subscriptions/listen streams, onto which the entry routes them.
      const server = createServer(app, app.nesting, era === 'modern' ? 'routed' : 'subscribed');
      // The run store's history loads once a 2025 client has finished the handshake, so that a
      // long history never slows start-up (a tool call needing it first loads it at once).
      if (era === 'legacy') server.server.oninitialized = () => app.iac.start();
      return server;
    },
    { transport },
  );
  setTimeout(() => app.iac.start(), 2000).unref();
  log(`${VERSION} serving on stdio for ${app.config.projectDir} (${app.backends.map((b) => b.name).join(', ')})`);
}

/**
 * The project's running daemon, where it listens, and the token to reach it with; undefined
 * when this polyspawn is an agent's (nested: it serves its own, smaller tree, and an agent's
 * polyspawn must not reach the user's daemon with the project's token), when there is no
 * daemon, no token, or daemon.json does not prove to name this user's daemon for this project.
 */
function sharedServer(
  log: (message: string) => void,
): { daemon: DaemonInfo; endpoint: string; token: string } | undefined {
  // A client that clears the environment it starts its servers with (Codex does) does not hide
  // the marker: it is on the agent's process, an ancestor of this one.
  if (process.env[DEPTH_ENV] !== undefined || ancestorVariables(NESTING_ENV)[DEPTH_ENV] !== undefined) return undefined;
  try {
    const stateDir = loadConfig(backends, process.env, process.cwd()).stateDir;
    const daemon = projectDaemonOf(backends, stateDir);
    if (daemon.state === 'untrusted') log(`not relaying to a daemon: ${daemon.why}; serving alone`);
    if (daemon.state !== 'running') return undefined;
    const token = projectToken(stateDir, process.env, false);
    if (token) return { daemon: daemon.info, endpoint: daemon.endpoint, token };
    log(`the project's daemon (pid ${daemon.info.pid}) runs, but its token is not readable here: serving alone`);
  } catch (error) {
    log(`not relaying to the project's daemon: ${(error as Error).message}`);
  }
  return undefined;
}
