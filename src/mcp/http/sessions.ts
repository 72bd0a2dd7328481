// The open MCP sessions of an HTTP listener, each owned by the principal that opened it. A
// session is one NodeStreamableHTTPServerTransport (stateful: it hands out the session id)
// connected to its own McpServer: how 2025-era clients are served (2026 ones are per request,
// listener.ts). Closing one answers every request still open with an error (a tool call
// blocked waiting, say), so the client hears at once instead of when its own time-out runs out,
// then closes the transport: its SSE responses end, and the server aborts the handlers.
import { randomUUID } from 'node:crypto';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import {
  type McpServer,
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/server';
import type { BoundedEventStore, EventBudget } from './event-store.js';
import { cutWhenStalled } from './stalled.js';

/**
 * The SDK's transport, keeping the ids of the client's requests it has not answered yet, and
 * cutting off a response its client stopped reading (stalled.ts).
 */
class TrackingTransport extends NodeStreamableHTTPServerTransport {
  readonly unanswered = new Set<RequestId>();
  /** Responses still open (a GET stream, a POST's SSE stream), and when the last request came or ended. */
  open = 0;
  lastSeen = Date.now();

  constructor(
    options: ConstructorParameters<typeof NodeStreamableHTTPServerTransport>[0],
    private readonly stalledMs: number,
    private readonly onStalled: () => void,
  ) {
    super(options);
  }

  override async handleRequest(...args: Parameters<NodeStreamableHTTPServerTransport['handleRequest']>): Promise<void> {
    const [, res] = args;
    this.open++;
    this.lastSeen = Date.now();
    cutWhenStalled(res, this.stalledMs, this.onStalled);
    res.once('close', () => {
      this.open--;
      this.lastSeen = Date.now();
    });
    return super.handleRequest(...args);
  }

  override send(message: JSONRPCMessage, options?: { relatedRequestId?: RequestId }): Promise<void> {
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) {
      this.unanswered.delete(message.id);
    }
    return super.send(message, options);
  }
}

/** Of two idle sessions, whether `a` goes first: one nobody listens to (no stream open), then the longest unused. */
const evictsBefore = (a: TrackingTransport, b: TrackingTransport) =>
  a.open > 0 !== b.open > 0 ? b.open > 0 : a.lastSeen < b.lastSeen;

export type Session<P> = {
  readonly principal: P;
  readonly transport: TrackingTransport;
  /** What it sent, for a client that resumes a stream (resumable streams only). */
  readonly events?: BoundedEventStore;
};

/** JSON-RPC's error for a request whose connection closed (the v1 SDK's ErrorCode.ConnectionClosed, which clients know). */
const CONNECTION_CLOSED = -32000;
const SESSION_CLOSED = 'Connection closed: the server ended this session (its run ended, or the server stopped)';

export class Sessions<P> {
  private readonly byId = new Map<string, Session<P>>();
  /** Every session a principal holds, initialized or still being opened: what its limit counts. */
  private readonly byPrincipal = new Map<P, Set<Session<P>>>();

  constructor(
    private readonly log: (line: string) => void,
    private readonly options: {
      /** Each session keeps what it sent within this budget, so a client that reconnects with Last-Event-ID gets what it missed. */
      eventBudget?: EventBudget;
      /** A response whose client took nothing of what waited for it this long is cut off. */
      stalledStreamMs: number;
    },
  ) {}

  /** The principal's session with this id; another principal's is not found either. */
  find(id: string, principal: P): Session<P> | undefined {
    const session = this.byId.get(id);
    return session?.principal === principal ? session : undefined;
  }

  /** Whether the id names another principal's session: for the log line only. */
  ownedByAnother(id: string, principal: P): boolean {
    return this.byId.has(id) && !this.find(id, principal);
  }

  count(principal: P): number {
    return this.byPrincipal.get(principal)?.size ?? 0;
  }

  /**
   * Ends the principal's idle session that has waited longest since its last request (idle: every
   * request it sent is answered), to make room for a new one: its client gets 404 on its next
   * request and opens a new session, as the transport spec asks. One whose client no longer
   * listens (no GET stream open) goes before one whose client does. False when all are busy.
   */
  evictOldestIdle(principal: P): boolean {
    let oldest: Session<P> | undefined;
    for (const session of this.byPrincipal.get(principal) ?? []) {
      const t = session.transport;
      // A session still being opened has no id yet and its initialize request unanswered: busy.
      if (t.sessionId === undefined || t.unanswered.size > 0) continue;
      if (!oldest || evictsBefore(t, oldest.transport)) oldest = session;
    }
    if (!oldest) return false;
    this.log(
      `mcp http: session ${shown(oldest.transport.sessionId)} ended, the oldest idle one: its principal opened one more`,
    );
    // Forgotten at once, so a concurrent opening cannot pick it too and the count drops now.
    this.forget(oldest);
    void this.close(oldest).catch(() => {});
    return true;
  }

  /**
   * A new session for the principal, counted at once (so concurrent openings cannot pass the
   * limit together); it gets its id when its initialize request is handled.
   */
  async open(principal: P, server: McpServer): Promise<Session<P>> {
    const events = this.options.eventBudget?.store();
    const transport = new TrackingTransport(
      {
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (id) => void this.byId.set(id, session),
        ...(events ? { eventStore: events } : {}),
      },
      this.options.stalledStreamMs,
      () =>
        this.log(`mcp http: session ${shown(transport.sessionId)}: a stream its client stopped reading was cut off`),
    );
    const session: Session<P> = { principal, transport, ...(events ? { events } : {}) };
    const held = this.byPrincipal.get(principal) ?? new Set<Session<P>>();
    held.add(session);
    this.byPrincipal.set(principal, held);
    // Set before connect: the server calls these first, then its own. A request the client
    // cancelled gets no answer: it leaves the list, or its session would look busy for good.
    transport.onmessage = (message) => {
      if (isJSONRPCRequest(message)) transport.unanswered.add(message.id);
      else if (isJSONRPCNotification(message) && message.method === 'notifications/cancelled') {
        const cancelled = (message.params as { requestId?: RequestId } | undefined)?.requestId;
        if (cancelled !== undefined) transport.unanswered.delete(cancelled);
      }
    };
    transport.onclose = () => this.forget(session);
    transport.onerror = (error) => this.log(`mcp http: session ${shown(transport.sessionId)}: ${error.message}`);
    try {
      await server.connect(transport);
    } catch (error) {
      this.forget(session);
      throw error;
    }
    return session;
  }

  /** Ends the session: its open requests get an error, its responses end, its handlers are aborted. */
  async close({ transport }: Session<P>): Promise<void> {
    const error = { code: CONNECTION_CLOSED, message: SESSION_CLOSED };
    // A request whose response stream is already gone cannot be answered: nothing to do for it.
    const answers = [...transport.unanswered].map((id) =>
      transport.send({ jsonrpc: '2.0', id, error }).catch(() => {}),
    );
    await Promise.all(answers);
    await transport.close();
  }

  closeAllOf(principal: P): Promise<void> {
    return this.closeEach([...(this.byPrincipal.get(principal) ?? [])]);
  }

  /**
   * Ends the sessions that have had no request and no open response for idleMs: a client that went
   * away without ending its session (DELETE) would otherwise hold it, and its server, for good.
   */
  closeIdle(idleMs: number): Promise<void> {
    const now = Date.now();
    const idle = [...this.byPrincipal.values()]
      .flatMap((held) => [...held])
      .filter(({ transport: t }) => t.open === 0 && t.unanswered.size === 0 && now - t.lastSeen > idleMs);
    for (const { transport } of idle)
      this.log(`mcp http: session ${shown(transport.sessionId)} idle for ${idleMs} ms: closed`);
    return this.closeEach(idle);
  }

  closeAll(): Promise<void> {
    return this.closeEach([...this.byPrincipal.values()].flatMap((held) => [...held]));
  }

  private async closeEach(sessions: Session<P>[]): Promise<void> {
    await Promise.all(sessions.map((session) => this.close(session)));
  }

  private forget(session: Session<P>): void {
    session.events?.release();
    if (session.transport.sessionId !== undefined) this.byId.delete(session.transport.sessionId);
    const held = this.byPrincipal.get(session.principal);
    held?.delete(session);
    if (held?.size === 0) this.byPrincipal.delete(session.principal);
  }
}

/**
 * A session id as the log shows it: its first 8 characters. The whole id is what a request
 * names its session by, so a log that an agent might read never holds it.
 */
const shown = (sessionId: string | undefined) => (sessionId === undefined ? '(opening)' : `${sessionId.slice(0, 8)}…`);
