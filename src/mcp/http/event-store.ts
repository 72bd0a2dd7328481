// Resumable streams (the SDK's EventStore): each message a session sends on an SSE stream is kept
// with an id, so a client whose connection dropped reconnects with Last-Event-ID and gets what it
// missed. Bounded per session: the oldest events go first (a client that stayed away past them
// gets what is left).
import type { EventId, EventStore, StreamId } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Events kept per session. */
export const MAX_EVENTS = 1000;

export class BoundedEventStore implements EventStore {
  private readonly events: { id: EventId; streamId: StreamId; message: JSONRPCMessage }[] = [];
  private next = 0;

  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    const id = `${streamId}_${++this.next}`;
    this.events.push({ id, streamId, message });
    if (this.events.length > MAX_EVENTS) this.events.shift();
    return id;
  }

  async getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return this.events.find((e) => e.id === eventId)?.streamId;
  }

  async replayEventsAfter(
    lastEventId: EventId,
    { send }: { send: (eventId: EventId, message: JSONRPCMessage) => Promise<void> },
  ): Promise<StreamId> {
    const at = this.events.findIndex((e) => e.id === lastEventId);
    if (at < 0) return '';
    const { streamId } = this.events[at]!;
    for (const e of this.events.slice(at + 1)) if (e.streamId === streamId) await send(e.id, e.message);
    return streamId;
  }
}
