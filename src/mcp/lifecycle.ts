// How a polyspawn server process ends, over stdio or HTTP: on SIGINT, SIGTERM, SIGHUP (or what the
// transport says), every agent is ended, IAC.md gets the final states, then the process exits.
import { formatWithOptions } from 'node:util';
import type { App } from '../app.js';
import { killAllGroupsNow } from '../jobs/process/runner.js';

/**
 * Installs the signal handlers; returns the shutdown, for the transport's own reasons (stdin
 * closed). `beforeAgents` runs first (stop taking requests), `afterAgents` last (remove files).
 */
export function exitOnSignals(
  app: App,
  log: (message: string) => void,
  hooks: { beforeAgents?: () => Promise<void>; afterAgents?: () => Promise<void> } = {},
): (why: string) => Promise<void> {
  let stopping = false;
  const shutdown = async (why: string) => {
    if (stopping) return;
    stopping = true;
    log(
      `shutting down (${why}): ending ${app.jobs.counts.running} running and ${app.jobs.counts.queued} queued agents`,
    );
    // Give each group its grace period, but never hang the exit on it.
    const deadline = new Promise((r) => setTimeout(r, app.config.killGraceMs + 2000).unref());
    await Promise.race([
      (async () => {
        await hooks.beforeAgents?.().catch(() => undefined);
        await Promise.all([app.teams.shutdown(), app.jobs.shutdown()]);
      })(),
      deadline,
    ]);
    killAllGroupsNow();
    // The jobs' final states are in the store; IAC.md gets them before the process ends.
    await app.iac.closeBeforeExit();
    await hooks.afterAgents?.().catch(() => undefined);
    process.exit(0);
  };
  // `on`, not `once`: signal-exit (in proper-lockfile and write-file-atomic) re-raises a signal
  // when its handlers are the only ones left, which would kill the server mid-shutdown.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void shutdown(signal));
  process.once('exit', killAllGroupsNow);
  return shutdown;
}

/**
 * stdout is the JSON-RPC stream: a library that logs with console.log, .info or .debug
 * (@hono/node-server, under the channel's HTTP transport, prints "The user aborted a request."
 * with console.info) would corrupt it. Their lines go to stderr instead.
 */
export function keepConsoleOffStdout(): void {
  const toStderr = (...args: unknown[]) => void process.stderr.write(`${formatWithOptions({}, ...args)}\n`);
  console.log = console.info = console.debug = toStderr;
}
