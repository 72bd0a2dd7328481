// `polyspawn serve --http`: one polyspawn for every client of a project, over MCP Streamable HTTP.
// One app (one job table, one concurrency limit, one run store writer, one channel for running
// agents) and one McpServer per client session over it (createServer removes what a session's
// server added to the app when the session closes). Every request carries the project's bearer
// token; Host, Origin, body size and sessions are src/mcp/http/listener.ts's.
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { createApp } from '../app.js';
import { collectWhenIdle } from '../jobs/idle-gc.js';
import { DEPTH_ENV } from '../jobs/agents/nesting.js';
import { InputError, SetupError } from '../lib/errors.js';
import { VERSION } from '../lib/version.js';
import { isLoopbackHost } from '../lib/sockets.js';
import { lazyParentChannel } from './channel/index.js';
import { dashboard } from './dashboard/dashboard.js';
import { lockDaemon, projectToken, removeDaemonFile, tokenMatches, writeDaemonFile } from '../lib/daemon-file.js';
import { listenHttpMcp, type HttpMcpListener } from './http/listener.js';
import { agentPeer } from './http/peer.js';
import { exitOnSignals, keepConsoleOffStdout } from './lifecycle.js';
import { publishChanges } from './resources.js';
import { createServer } from './server.js';
import { agentSpawnTools } from './tools/agent-spawn.js';

type HttpServeOptions = {
  /** Default: a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Binding an address other than loopback must be asked for. */
  allowRemote?: boolean;
};

/** The one principal of the shared server: whoever holds the project's token. */
const CLIENT = 'client';
/**
 * Sessions at once (each holds one McpServer). One more ends the oldest idle one (its client gets
 * 404 and opens a new one); 429 only while all of them have a request in flight.
 */
const MAX_SESSIONS = 256;
/**
 * A session with no request and no open stream for this long is ended, so clients that vanish
 * without ending theirs cannot use up MAX_SESSIONS; a client that comes back re-initializes on
 * the 404 (as the transport spec asks).
 */
const IDLE_SESSION_MS = 30 * 60_000;

async function serveHttp(log: (message: string) => void, options: HttpServeOptions): Promise<void> {
  keepConsoleOffStdout();
  const host = options.host ?? '127.0.0.1';
  if (!isIP(host) && host !== 'localhost') throw new InputError(`--host "${host}" is not an IP address`);
  if (!isLoopbackHost(host) && !options.allowRemote) {
    throw new InputError(
      `--host ${host} is not loopback: anyone who can reach it and holds the token can run agents in this project; add --allow-remote to mean it`,
    );
  }
  const app = createApp(process.env, process.cwd(), undefined, undefined, { parentChannel: lazyParentChannel });
  // The project's clients relay to its daemon: one an agent started would serve them with the
  // agent's depth, environment and config. An agent's polyspawn serves its own tree on stdio.
  if (app.nesting.depth > 0) {
    throw new InputError(
      `polyspawn serve --http runs inside an agent that polyspawn started (${DEPTH_ENV}=${app.nesting.depth}): the project's shared server is started by you, not by an agent`,
    );
  }
  const stateDir = app.config.stateDir;
  const token = projectToken(stateDir, app.env, true)!;
  const unlock = await lockDaemon(stateDir);
  let listener: HttpMcpListener<string>;
  try {
    listener = await listenHttpMcp<string>({
      authenticate: (given) => (tokenMatches(token, given) ? CLIENT : undefined),
      // An agent that read the token gets no spawn tools (src/mcp/http/peer.ts).
      serverFor: (_, opening, era) => {
        const agent = agentPeer(opening.socket);
        if (agent) log(`a session without spawn tools: ${agent.reason}`);
        // A 2026 request's server lives for that request: the listener's notifier carries the changes.
        return createServer(app, agent ?? app.nesting, era === 'modern' ? 'published' : 'subscribed');
      },
      maxSessionsPerPrincipal: MAX_SESSIONS,
      idleSessionMs: IDLE_SESSION_MS,
      resumableStreams: true,
      modern: true,
      host,
      port: options.port,
      otherPath: dashboard(app, token),
      log,
    });
  } catch (error) {
    await unlock();
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new SetupError(
        `port ${options.port} on ${host} is in use: pick another with --port, or leave it out for a free one`,
      );
    }
    throw error;
  }
  collectWhenIdle(app.jobs);
  // 2026 clients hear the changes on their subscriptions/listen streams (the notifier: modern above).
  const stopPublishing = publishChanges(app, listener.notify!, (changed) => {
    const named = agentSpawnTools(app);
    return named.onChange?.(changed) ?? (() => undefined);
  });
  const info = writeDaemonFile(stateDir, listener.url, listener.port);
  exitOnSignals(app, log, {
    beforeAgents: () => {
      stopPublishing();
      return listener.close();
    },
    afterAgents: async () => {
      removeDaemonFile(stateDir);
      await unlock();
    },
  });
  app.iac.start();
  log(
    `${VERSION} serving ${app.config.projectDir} on ${listener.url} (pid ${info.pid}; ${app.backends.map((b) => b.name).join(', ')})`,
  );
}

/** `serve --http ...`'s arguments. */
export async function serveHttpCommand(argv: string[], log: (message: string) => void): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        http: { type: 'boolean' },
        port: { type: 'string' },
        host: { type: 'string' },
        'allow-remote': { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new InputError(`serve: ${(error as Error).message}`);
  }
  if (!values.http)
    throw new InputError('serve takes no arguments without --http (serve --http [--port N] [--host H])');
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port < 65536)) {
    throw new InputError(`--port "${values.port}" is not a port number (0 to 65535; 0 or none: a free one)`);
  }
  return serveHttp(log, { port, host: values.host, allowRemote: values['allow-remote'] });
}
