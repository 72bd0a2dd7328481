// Resumable streams (the SDK's EventStore): each message a session sends on an SSE stream is kept
// with an id, so a client whose connection dropped reconnects with Last-Event-ID and gets what it
// missed. Bounded in bytes, per session and across every session of a listener (EventBudget): the
// oldest events go first, so what a client reads (a page of a log is up to a MiB) cannot pile up
// in the server. A resume after an event no longer kept is refused: what followed it may be gone.
import type { EventId, EventStore, JSONRPCMessage, StreamId } from '@modelcontextprotocol/server';

export type EventLimits = {
  /** Bytes of events one session keeps. */
  sessionBytes: number;
  /** Bytes of events every session of the listener keeps together. */
  totalBytes: number;
};

export const DEFAULT_EVENT_LIMITS: EventLimits = { sessionBytes: 4 * 1024 * 1024, totalBytes: 64 * 1024 * 1024 };

/** What an event costs beside its message (its id, the entry): so a flood of tiny events is bounded too. */
const EVENT_OVERHEAD_BYTES = 128;

type StoredEvent = { id: EventId; streamId: StreamId; message: JSONRPCMessage; bytes: number; seq: number };

/** The stores of one listener's sessions, and the bytes they hold together. */
export class EventBudget {
  private readonly stores = new Set<BoundedEventStore>();
  private bytes = 0;
  private seq = 0;

  constructor(readonly limits: EventLimits = DEFAULT_EVENT_LIMITS) {}

  /** A new session's store; release() it when the session ends. */
  store(): BoundedEventStore {
    const store = new BoundedEventStore(this);
    this.stores.add(store);
    return store;
  }

  /** Bytes held by every store now. */
  get heldBytes(): number {
    return this.bytes;
  }

  /** @internal the stores' accounting */
  added(bytes: number): number {
    this.bytes += bytes;
    // The oldest event of all goes first: it heads one of the stores.
    while (this.bytes > this.limits.totalBytes) {
      let oldest: BoundedEventStore | undefined;
      for (const store of this.stores) {
        const seq = store.oldestSeq();
        if (seq !== undefined && (oldest === undefined || seq < oldest.oldestSeq()!)) oldest = store;
      }
      if (!oldest) break;
      oldest.dropOldest();
    }
    return ++this.seq;
  }

  /** @internal */
  dropped(bytes: number): void {
    this.bytes -= bytes;
  }

  /** @internal */
  released(store: BoundedEventStore): void {
    this.stores.delete(store);
  }
}

export class BoundedEventStore implements EventStore {
  /** Oldest first, from `head` on; the slots before it are dropped events, cleared now and then. */
  private events: (StoredEvent | undefined)[] = [];
  private head = 0;
  private readonly byId = new Map<EventId, StoredEvent>();
  private bytes = 0;
  private ended = false;

  constructor(private readonly budget: EventBudget) {}

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    // What a closing session still sends is not kept: nothing could resume it.
    if (this.ended) return `${streamId}_ended`;
    const bytes = Buffer.byteLength(JSON.stringify(message)) + EVENT_OVERHEAD_BYTES;
    while (this.bytes + bytes > this.budget.limits.sessionBytes && this.oldestSeq() !== undefined) this.dropOldest();
    const seq = this.budget.added(bytes);
    const event: StoredEvent = { id: `${streamId}_${seq}`, streamId, message, bytes, seq };
    this.bytes += bytes;
    this.events.push(event);
    this.byId.set(event.id, event);
    // An event larger than a session may keep is sent, not kept: a resume after it is refused.
    if (bytes > this.budget.limits.sessionBytes) this.dropOldest();
    return event.id;
  }

  /** Whether a resume after this event can replay all that followed it. */
  holds(eventId: EventId): boolean {
    return this.byId.has(eventId);
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return this.byId.get(eventId)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const last = this.byId.get(lastEventId);
    if (!last) return '';
    // A copy: sending may store new events meanwhile.
    const after = this.events
      .slice(this.head)
      .filter((e): e is StoredEvent => e !== undefined && e.seq > last.seq && e.streamId === last.streamId);
    for (const e of after) await send(e.id, e.message);
    return last.streamId;
  }

  /** Bytes this session's events hold. */
  get heldBytes(): number {
    return this.bytes;
  }

  /** The session ended: its events go, and their bytes with them. */
  release(): void {
    this.ended = true;
    this.budget.dropped(this.bytes);
    this.budget.released(this);
    this.events = [];
    this.head = 0;
    this.byId.clear();
    this.bytes = 0;
  }

  /** @internal */
  oldestSeq(): number | undefined {
    return this.events[this.head]?.seq;
  }

  /** @internal */
  dropOldest(): void {
    const event = this.events[this.head];
    if (!event) return;
    this.events[this.head++] = undefined; // let it be collected
    this.byId.delete(event.id);
    this.bytes -= event.bytes;
    this.budget.dropped(event.bytes);
    if (this.head > 1024 && this.head * 2 > this.events.length) {
      this.events = this.events.slice(this.head);
      this.head = 0;
    }
  }
}
