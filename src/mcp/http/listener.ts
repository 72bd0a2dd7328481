// MCP over Streamable HTTP on 127.0.0.1, for clients holding a bearer token: the per-run channel
// serves the agents polyspawn started, and the shared server (serve-http.ts) its clients over the
// same stack. Each request is checked before its body is read, in this order: Host and Origin (DNS
// rebinding, as the MCP transport spec asks), path, method, bearer token; then the body is read
// up to a cap and parsed, and the request goes to the session its mcp-session-id names, if that
// session belongs to the same principal. Every refusal is a JSON-RPC error body with its HTTP
// status, and a line in the log (never the token).
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIPv6, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { toNodeHandler, toWebRequest } from '@modelcontextprotocol/node';
import {
  createMcpHandler,
  isInitializeRequest,
  isLegacyRequest,
  type AuthInfo,
  type McpServer,
  type ServerNotifier,
} from '@modelcontextprotocol/server';
import { readBody } from './body.js';
import { EventBudget, type EventLimits } from './event-store.js';
import { Sessions } from './sessions.js';
import { cutWhenStalled } from './stalled.js';

export type HttpMcpOptions<P> = {
  /**
   * The principal a bearer token stands for (a running job), or undefined: 401. Called on every
   * request, and again before a session is opened; principals are compared with ===.
   */
  authenticate(token: string): P | undefined;
  /**
   * A fresh McpServer for a new 2025 session opened by this principal, with the initialize request
   * that opens it (era "legacy"), or for one 2026 request (era "modern"), with that request.
   */
  serverFor(principal: P, opening: IncomingMessage, era: 'legacy' | 'modern'): McpServer;
  /**
   * Serves the 2026-07-28 protocol too (default: only 2025's sessions): a request that carries
   * its `_meta` envelope is answered whole by a server built for it alone, by serverFor.
   */
  modern?: boolean;
  /** Default '/mcp'. */
  path?: string;
  /** Default 256 KiB; a larger body gets 413. */
  maxBodyBytes?: number;
  /**
   * Default 4. One more ends the principal's oldest idle session (no request unanswered), whose
   * client gets 404 and re-initializes; 429 only while every one of them has a request in flight.
   */
  maxSessionsPerPrincipal?: number;
  /** One line per refused request. */
  log?: (line: string) => void;
  /** Streams a client can resume after a dropped connection (Last-Event-ID; default: off). */
  resumableStreams?: boolean;
  /** What resumable streams keep, in bytes (default DEFAULT_EVENT_LIMITS). */
  eventLimits?: EventLimits;
  /**
   * A response (an SSE stream) whose client has taken nothing of what waits for it for this long
   * is cut off, so an unread stream cannot grow the server (default 60 s).
   */
  stalledStreamMs?: number;
  /** Sessions with no request and no open response for this long are ended (default: never). */
  idleSessionMs?: number;
  /** Default 127.0.0.1; the caller decides whether another address may be bound. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
  /**
   * A request for another path than the MCP one, once its Host and Origin passed: answered here
   * (true), or 404 (false). Its own authentication is the handler's (the dashboard's cookie).
   */
  otherPath?: (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;
};

export type HttpMcpListener<P> = {
  /** http://127.0.0.1:<port><path> */
  url: string;
  port: number;
  /**
   * Closes every session the principal opened (its run ended): their open responses end and
   * their tool calls in flight are aborted. Revoke its token first, so it cannot open another.
   */
  endSessionsOf(principal: P): Promise<void>;
  /** Bytes the sessions' resumable streams keep now, all together. */
  storedEventBytes(): number;
  /**
   * With `modern`: what reaches 2026 clients' `subscriptions/listen` streams (the servers built
   * per request are gone by the time something changes), each one filtered by what it listens to.
   */
  notify?: ServerNotifier;
  /** Closes every session, the server and every socket. */
  close(): Promise<void>;
};

const LOOPBACK = '127.0.0.1';
const DEFAULT_MAX_BODY_BYTES = 256 * 1024;
const DEFAULT_MAX_SESSIONS = 4;
const DEFAULT_STALLED_STREAM_MS = 60_000;

/** JSON-RPC error codes of the refusals: the SDK's transport uses the same for the same cases. */
const PARSE_ERROR = -32700;
const INTERNAL_ERROR = -32603;
const REFUSED = -32000;
const SESSION_NOT_FOUND = -32001;

type Refusal = { status: number; message: string; code?: number; headers?: Record<string, string>; why?: string };

/** The same answer for a missing, malformed, unknown or revoked token: it tells nothing of which exist. */
const unauthorized = (why: string): Refusal => ({
  status: 401,
  message: 'Unauthorized: send the bearer token this server gave you, as "Authorization: Bearer <token>"',
  headers: { 'WWW-Authenticate': 'Bearer' },
  why,
});
const shuttingDown: Refusal = { status: 503, message: 'Service Unavailable: this server is shutting down' };

export async function listenHttpMcp<P>(options: HttpMcpOptions<P>): Promise<HttpMcpListener<P>> {
  const path = options.path ?? '/mcp';
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const maxSessions = options.maxSessionsPerPrincipal ?? DEFAULT_MAX_SESSIONS;
  const log = options.log ?? (() => {});
  const host = options.host ?? LOOPBACK;
  const eventBudget = options.resumableStreams ? new EventBudget(options.eventLimits) : undefined;
  const stalledMs = options.stalledStreamMs ?? DEFAULT_STALLED_STREAM_MS;
  const sessions = new Sessions<P>(log, { ...(eventBudget ? { eventBudget } : {}), stalledStreamMs: stalledMs });
  // 2026 requests: the SDK's entry, strict (2025 traffic goes to the sessions), a server per
  // request. Who asked rides along as the request's pass-through authInfo.
  const modern = options.modern
    ? createMcpHandler(
        (ctx) => {
          const asked = ctx.authInfo?.extra as { principal: P; req: IncomingMessage };
          return options.serverFor(asked.principal, asked.req, 'modern');
        },
        { legacy: 'reject', onerror: (error) => log(`mcp http: ${error.message}`) },
      )
    : undefined;
  const serveModern = modern && toNodeHandler(modern);
  let allowedHosts = new Set<string>();
  let allowedOrigins = new Set<string>();
  let closing: Promise<void> | undefined;

  const refuse = (req: IncomingMessage, res: ServerResponse, refusal: Refusal): void => {
    const where = `${req.method} ${pathOf(req) === path ? path : 'another path'}`;
    log(`mcp http: ${refusal.status} for ${where}: ${refusal.why ?? refusal.message}`);
    const body = errorBody(refusal.code ?? REFUSED, refusal.message);
    res.writeHead(refusal.status, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(body),
      ...refusal.headers,
    });
    res.end(body);
  };

  /** Host and Origin: refused, or undefined. */
  const checkOrigin = (req: IncomingMessage): Refusal | undefined => {
    if (closing) return shuttingDown;
    if (!allowedHosts.has(req.headers.host?.toLowerCase() ?? '')) {
      return { status: 403, message: `Forbidden: the Host header must be one of ${[...allowedHosts].join(', ')}` };
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !allowedOrigins.has(origin.toLowerCase())) {
      return {
        status: 403,
        message: `Forbidden: an Origin header, when sent, must be one of ${[...allowedOrigins].join(', ')}`,
      };
    }
    return undefined;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (options.otherPath && pathOf(req) !== path && !checkOrigin(req) && (await options.otherPath(req, res))) return;
    // What to refuse before the body is read, or who the request is from.
    const checked = checkOrigin(req) ?? authorize(req, path, (t) => options.authenticate(t));
    if (!('principal' in checked)) return refuse(req, res, checked);
    const { principal, token } = checked;
    const sessionId = req.headers['mcp-session-id'];

    if (typeof sessionId === 'string') {
      const session = sessions.find(sessionId, principal);
      if (!session) {
        return refuse(req, res, {
          status: 404,
          code: SESSION_NOT_FOUND,
          message: 'Session not found: it has ended; open a new one with an initialize request',
          why: sessions.ownedByAnother(sessionId, principal) ? "another principal's session id" : undefined,
        });
      }
      const lastEventId = req.headers['last-event-id'];
      if (req.method === 'GET' && typeof lastEventId === 'string' && session.events?.holds(lastEventId) === false) {
        return refuse(req, res, {
          status: 400,
          message: `Bad Request: Last-Event-ID names an event this server no longer keeps (a session keeps its newest ${eventBudget!.limits.sessionBytes} bytes of events): what followed it may be lost; send the request again`,
        });
      }
      if (req.method !== 'POST') return session.transport.handleRequest(req, res);
      const body = await readJson(req, maxBodyBytes);
      return 'json' in body ? session.transport.handleRequest(req, res, body.json) : refuse(req, res, body);
    }

    if (req.method !== 'POST') {
      return refuse(req, res, {
        status: 400,
        message: `Bad Request: ${req.method} needs the mcp-session-id header of an open session`,
      });
    }
    const body = await readJson(req, maxBodyBytes);
    if (!('json' in body)) return refuse(req, res, body);
    if (serveModern && !(await isLegacyRequest(await toWebRequest(req, body.json), body.json))) {
      const auth: AuthInfo = { token: '', clientId: 'polyspawn', scopes: [], extra: { principal, req } };
      cutWhenStalled(res, stalledMs, () => log('mcp http: a 2026 response its client stopped reading was cut off'));
      return serveModern(Object.assign(req, { auth }), res, body.json);
    }
    if (!isInitializeRequest(body.json)) {
      return refuse(req, res, {
        status: 400,
        message: 'Bad Request: send an initialize request first, then its mcp-session-id header on every request',
      });
    }
    // While the body was read, the server may have begun to close or the token been revoked
    // (and its sessions ended): no new session then.
    if (closing) return refuse(req, res, shuttingDown);
    if (options.authenticate(token) !== principal)
      return refuse(req, res, unauthorized('revoked while the request was read'));
    if (sessions.count(principal) >= maxSessions && !sessions.evictOldestIdle(principal)) {
      return refuse(req, res, {
        status: 429,
        message: `Too Many Requests: this token holds ${maxSessions} open sessions, the most it may, each with a request in flight; wait for one to be answered, or end one (DELETE ${path} with its mcp-session-id), before opening another`,
      });
    }
    const session = await sessions.open(principal, options.serverFor(principal, req, 'legacy'));
    try {
      await session.transport.handleRequest(req, res, body.json);
    } finally {
      // The transport refused the initialize request (a missing Accept type, say): no session.
      if (session.transport.sessionId === undefined) await sessions.close(session);
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log(`mcp http: ${req.method} ${path}: ${error instanceof Error ? error.message : String(error)}`);
      // A client that went away mid-body gets no answer; anything else, a 500 if it is not too late.
      if (res.headersSent || req.destroyed) return void res.destroy();
      refuse(req, res, { status: 500, code: INTERNAL_ERROR, message: 'Internal error: the request failed; try again' });
    });
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => answerUnreadable(error, socket, log));
  await listen(server, options.port ?? 0, host);
  const port = (server.address() as AddressInfo).port;
  const idleMs = options.idleSessionMs;
  const sweep = idleMs
    ? setInterval(() => void sessions.closeIdle(idleMs), Math.min(idleMs, 60_000)).unref()
    : undefined;
  // An IPv6 address goes in brackets in a URL and a Host header ([::1]:port).
  const authority = isIPv6(host) ? new URL(`http://[${host}]/`).hostname : host;
  allowedHosts = new Set([`${authority}:${port}`, `${LOOPBACK}:${port}`, `localhost:${port}`]);
  allowedOrigins = new Set([...allowedHosts].map((host) => `http://${host}`));

  return {
    url: `http://${authority}:${port}${path}`,
    port,
    endSessionsOf: (principal) => sessions.closeAllOf(principal),
    storedEventBytes: () => eventBudget?.heldBytes ?? 0,
    ...(modern ? { notify: modern.notify } : {}),
    close() {
      clearInterval(sweep);
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        await sessions.closeAll();
        await modern?.close();
        server.closeAllConnections();
        await stopped;
      })();
      return closing;
    },
  };
}

/** A request to MCP's path, by a method it serves, with a bearer token that names a principal; or what to refuse. */
function authorize<P>(
  req: IncomingMessage,
  path: string,
  authenticate: (token: string) => P | undefined,
): Refusal | { principal: P; token: string } {
  if (pathOf(req) !== path) return { status: 404, message: `Not Found: MCP is served at ${path}` };
  if (req.method !== 'POST' && req.method !== 'GET' && req.method !== 'DELETE') {
    return {
      status: 405,
      message: `Method Not Allowed: use POST, GET or DELETE on ${path}`,
      headers: { Allow: 'GET, POST, DELETE' },
    };
  }
  const authorization = req.headers.authorization;
  if (authorization === undefined) return unauthorized('no Authorization header');
  const token = /^Bearer +(\S+)$/i.exec(authorization)?.[1];
  if (token === undefined) return unauthorized('an Authorization header that is not "Bearer <token>"');
  const principal = authenticate(token);
  if (principal === undefined) return unauthorized('a bearer token that is unknown or revoked');
  return { principal, token };
}

/** The body as JSON, or what to answer instead. */
async function readJson(req: IncomingMessage, maxBodyBytes: number): Promise<Refusal | { json: unknown }> {
  const body = await readBody(req, maxBodyBytes);
  if (body === 'too-large') {
    return {
      status: 413,
      message: `Payload Too Large: a request body may hold at most ${maxBodyBytes} bytes`,
      // The rest of the body is not read: the connection cannot carry another request.
      headers: { Connection: 'close' },
    };
  }
  try {
    return { json: JSON.parse(body.toString('utf8')) };
  } catch {
    return { status: 400, code: PARSE_ERROR, message: 'Parse error: the request body is not valid JSON' };
  }
}

/**
 * A request Node could not parse (garbage, headers over its limit, too slow): answered here with
 * a JSON-RPC body like every other refusal, instead of Node's bare status line.
 */
function answerUnreadable(error: NodeJS.ErrnoException, socket: Duplex, log: (message: string) => void): void {
  if (error.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const message = `${STATUS_CODES[status]}: the request could not be read as HTTP (${error.code ?? error.message})`;
  log(`mcp http: ${status}: ${message}`);
  const body = errorBody(REFUSED, message);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The path of the request's URL, without its query. */
const pathOf = (req: IncomingMessage) => (req.url ?? '').split('?', 1)[0];

const errorBody = (code: number, message: string) =>
  JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
