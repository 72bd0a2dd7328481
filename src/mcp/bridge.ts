// `polyspawn serve` when the project's daemon runs: a thin relay between the client on stdio and
// the daemon over Streamable HTTP. Messages pass through untouched (tools, resources,
// notifications, progress, cancellation); the daemon keeps the session. When the daemon stops
// answering, the requests still open and every later one get an error that says so, and the
// client hears it as a logging message; when the client goes away, the session is ended and
// the daemon's agents keep running.
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { sameProcessAlive } from '../lib/proc.js';
import type { DaemonInfo } from '../lib/daemon-file.js';
import { StdioTransport } from './stdio-transport.js';

/** The JSON-RPC error code of a request the relay could not deliver. */
const DAEMON_GONE = -32000;

/**
 * Relays stdio to the daemon at `url`, where it was seen listening (never a URL read from a
 * file). The token goes only there: no redirect is followed, and nothing is sent once the
 * daemon's process has ended (another process could then take its port).
 */
export async function bridgeStdio(daemon: DaemonInfo, url: string, token: string, log: (message: string) => void) {
  const { pid } = daemon;
  const alive = () => sameProcessAlive(pid, daemon.start);
  const upstream = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: (input, init) =>
      alive() ? fetch(input, { ...init, redirect: 'error' }) : Promise.reject(new Error('its process has ended')),
  });
  const downstream = new StdioTransport();
  const unanswered = new Set<RequestId>();
  let gone: string | undefined;

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

  upstream.onmessage = (message: JSONRPCMessage) => {
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) {
      unanswered.delete(message.id);
    }
    void downstream.send(message).catch(() => undefined);
  };
  upstream.onerror = (error) => {
    if (!alive()) daemonGone('has stopped');
    else log(`relay to ${url}: ${error.message}`);
  };
  downstream.onmessage = (message: JSONRPCMessage) => {
    const request = isJSONRPCRequest(message);
    if (gone) return void (request && fail(message.id));
    if (request) unanswered.add(message.id);
    upstream.send(message).catch((error: Error) => {
      if (!alive()) return daemonGone('has stopped');
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
