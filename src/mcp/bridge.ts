// `polyspawn serve` when the project's daemon runs: a thin relay between the client on stdio and
// the daemon over Streamable HTTP. Messages pass through untouched (tools, resources,
// notifications, progress, cancellation); the daemon keeps the session. When the daemon stops
// answering, the requests still open and every later one get an error that says so, and the
// client hears it as a logging message; when the daemon ends the session (it makes room past
// its bound), a new one is opened with the client's own initialize; when the client goes away,
// the session is ended and the daemon's agents keep running.
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  isInitializeRequest,
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { sameProcessAlive } from '../lib/proc.js';
import type { DaemonInfo } from '../lib/daemon-file.js';
import { StdioTransport } from './stdio-transport.js';

/** How long the daemon may take to open a new session for a client whose session it ended. */
const REOPEN_MS = 30_000;
/** The JSON-RPC error code of a request the relay could not deliver. */
const DAEMON_GONE = -32000;
/** How long a failed request waits for a dying daemon's process to show as ended. */
const SETTLE_MS = 1_000;
const SETTLE_STEP_MS = 50;
const METHOD_NOT_FOUND = -32601;

/**
 * Relays stdio to the daemon at `url`, where it was seen listening (never a URL read from a
 * file). The token goes only there: no redirect is followed, and nothing is sent once the
 * daemon's process has ended (another process could then take its port).
 */
export async function bridgeStdio(daemon: DaemonInfo, url: string, token: string, log: (message: string) => void) {
  const { pid } = daemon;
  const alive = () => sameProcessAlive(pid, daemon.start);
  /**
   * Whether the daemon still runs once a failed request has had time to tell: a killed process
   * closes its sockets before it shows as ended, so a refused connection is read only after that.
   */
  const stillAlive = async () => {
    for (let waited = 0; waited < SETTLE_MS; waited += SETTLE_STEP_MS) {
      if (!alive()) return false;
      await new Promise((resolve) => setTimeout(resolve, SETTLE_STEP_MS));
    }
    return alive();
  };
  const connect = () =>
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
      fetch: (input, init) =>
        alive() ? fetch(input, { ...init, redirect: 'error' }) : Promise.reject(new Error('its process has ended')),
    });
  let upstream = connect();
  const downstream = new StdioTransport();
  const unanswered = new Set<RequestId>();
  let gone: string | undefined;
  /** The client's initialize request: replayed when the daemon ends this session (see reopen). */
  let opening: JSONRPCMessage | undefined;
  /** The answer to a replayed initialize, which the client must not see. */
  let replayed: { id: RequestId; answered: () => void } | undefined;
  let reopening: Promise<void> | undefined;

  const fail = (id: RequestId) =>
    downstream.send({ jsonrpc: '2.0', id, error: { code: DAEMON_GONE, message: gone! } }).catch(() => undefined);
  const daemonGone = (why: string) => {
    if (gone) return;
    gone = `the project's polyspawn daemon (pid ${pid}, ${url}) ${why}: its agents were ended; start it again (polyspawn daemon start) and restart this MCP server, or stop the daemon to serve alone`;
    log(gone);
    void downstream
      .send({
        jsonrpc: '2.0',
        method: 'notifications/message',
        params: { level: 'error', logger: 'polyspawn', data: gone },
      })
      .catch(() => undefined);
    for (const id of unanswered) void fail(id);
    unanswered.clear();
  };

  const wire = (transport: StreamableHTTPClientTransport) => {
    transport.onmessage = (message: JSONRPCMessage) => {
      if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) {
        if (replayed && message.id === replayed.id) return replayed.answered();
        unanswered.delete(message.id);
      }
      void downstream.send(message).catch(() => undefined);
    };
    transport.onerror = (error) =>
      void stillAlive().then((running) =>
        running ? log(`relay to ${url}: ${error.message}`) : daemonGone('has stopped'),
      );
  };
  wire(upstream);

  /**
   * The daemon ended this client's session (404: it makes room for newer ones, or it was idle
   * past its limit). The client knows nothing of sessions behind the relay, so the relay opens a
   * new one with the client's own initialize and goes on; what the old session subscribed to is
   * gone with it.
   */
  const reopen = (init: JSONRPCMessage & { id: RequestId }) =>
    (reopening ??= (async () => {
      log("the daemon ended this client's session: opening a new one");
      const old = upstream;
      upstream = connect();
      wire(upstream);
      await old.close().catch(() => undefined);
      const answered = new Promise<void>(
        (resolve) => (replayed = { id: `relay-reopen-${Date.now()}`, answered: resolve }),
      );
      await upstream.send({ ...init, id: replayed!.id });
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the daemon did not answer a new initialize')), REOPEN_MS);
      });
      await Promise.race([answered, late]).finally(() => clearTimeout(timer));
      replayed = undefined;
      await upstream.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    })().finally(() => (reopening = undefined)));

  const deliver = async (message: JSONRPCMessage) => {
    if (reopening) await reopening;
    const via = upstream;
    try {
      await via.send(message);
    } catch (error) {
      const ended = error instanceof StreamableHTTPError && error.code === 404;
      if (!ended || !opening || !alive()) throw error;
      // Sent on a session another message has already replaced: only send it again.
      if (via === upstream) await reopen(opening as JSONRPCMessage & { id: RequestId });
      else if (reopening) await reopening;
      await upstream.send(message);
    }
  };

  downstream.onmessage = (message: JSONRPCMessage) => {
    const request = isJSONRPCRequest(message);
    if (gone) return void (request && fail(message.id));
    // The relay carries a 2025 session (initialize, then its mcp-session-id): a 2026 client's
    // probe is answered as a 2025-only server answers it, and the client falls back to initialize.
    if (request && message.method === 'server/discover') {
      void downstream
        .send({
          jsonrpc: '2.0',
          id: message.id,
          error: { code: METHOD_NOT_FOUND, message: 'server/discover: relayed to a 2025-era session; use initialize' },
        })
        .catch(() => undefined);
      return;
    }
    if (request) unanswered.add(message.id);
    if (isInitializeRequest(message)) opening = message;
    deliver(message).catch(async (error: Error) => {
      // An HTTP status is the daemon's own answer: only a failed connection waits to learn whether it still runs.
      if (!(error instanceof StreamableHTTPError) && !(await stillAlive())) return daemonGone('has stopped');
      log(`relay to ${url}: ${error.message}`);
      if (request) {
        unanswered.delete(message.id);
        void downstream
          .send({
            jsonrpc: '2.0',
            id: message.id,
            error: { code: DAEMON_GONE, message: `the daemon refused it: ${error.message}` },
          })
          .catch(() => undefined);
      }
    });
  };
  let closing = false;
  const close = async (why: string) => {
    if (closing) return;
    closing = true;
    log(`relay ends (${why}); the daemon's agents keep running`);
    await upstream.terminateSession().catch(() => undefined);
    await upstream.close().catch(() => undefined);
    process.exit(0);
  };
  downstream.onclose = () => void close('stdin closed');
  process.stdin.once('end', () => void close('stdin closed'));
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void close(signal));
  await upstream.start();
  await downstream.start();
  log(`relaying this client to the project's daemon at ${url} (pid ${pid})`);
}
