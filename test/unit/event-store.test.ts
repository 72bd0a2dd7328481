// The resumable streams' event store (src/mcp/http/event-store.ts): bounded in bytes per session
// and across sessions, the oldest events first; a resume replays only what is still kept.
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, test } from 'vitest';
import { EventBudget, type BoundedEventStore } from '../../src/mcp/http/event-store.js';

const KiB = 1024;
/** A notification of about `bytes` bytes as JSON. */
const message = (bytes: number, n = 0): JSONRPCMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/message',
  params: { n, data: 'x'.repeat(bytes) },
});

async function replayed(store: BoundedEventStore, after: string): Promise<number[]> {
  const got: number[] = [];
  await store.replayEventsAfter(after, {
    send: async (_id, m) => void got.push((m as unknown as { params: { n: number } }).params.n),
  });
  return got;
}

describe('the event store', () => {
  test('a session keeps at most sessionBytes: the oldest go first, and a resume after one of them is refused', async () => {
    const budget = new EventBudget({ sessionBytes: 100 * KiB, totalBytes: 10_000 * KiB });
    const store = budget.store();
    const ids: string[] = [];
    for (let n = 0; n < 150; n++) ids.push(await store.storeEvent('s1', message(10 * KiB, n)));
    expect(store.heldBytes).toBeLessThanOrEqual(100 * KiB);
    expect(store.heldBytes).toBeGreaterThan(80 * KiB);
    expect(budget.heldBytes).toBe(store.heldBytes);
    expect(store.holds(ids[0]!)).toBe(false);
    expect(await store.getStreamIdForEventId(ids[0]!)).toBeUndefined();
    expect(await replayed(store, ids[0]!)).toEqual([]);
    // What is kept replays in order, and only the resumed stream's events.
    await store.storeEvent('s2', message(10, 1000));
    await store.storeEvent('s1', message(10, 150));
    expect(store.holds(ids[145]!)).toBe(true);
    expect(await store.getStreamIdForEventId(ids[145]!)).toBe('s1');
    expect(await replayed(store, ids[145]!)).toEqual([146, 147, 148, 149, 150]);
  });

  test('every session together keeps at most totalBytes: the oldest events of all go first', async () => {
    const budget = new EventBudget({ sessionBytes: 1000 * KiB, totalBytes: 300 * KiB });
    const stores = Array.from({ length: 10 }, () => budget.store());
    const first: string[] = [];
    for (let round = 0; round < 20; round++)
      for (const [i, store] of stores.entries()) {
        const id = await store.storeEvent('s', message(5 * KiB, round));
        if (round === 0) first[i] = id;
      }
    expect(budget.heldBytes).toBeLessThanOrEqual(300 * KiB);
    expect(budget.heldBytes).toBeGreaterThan(250 * KiB);
    expect(budget.heldBytes).toBe(stores.reduce((sum, s) => sum + s.heldBytes, 0));
    // Each session lost its oldest, none lost all: the newest 5 or so rounds of each are kept.
    for (const [i, store] of stores.entries()) {
      expect(store.holds(first[i]!)).toBe(false);
      expect(store.heldBytes).toBeGreaterThan(20 * KiB);
    }
    // A session that ends gives its bytes back.
    const before = budget.heldBytes;
    const gone = stores[0]!.heldBytes;
    stores[0]!.release();
    expect(budget.heldBytes).toBe(before - gone);
    await stores[0]!.storeEvent('s', message(5 * KiB));
    expect(budget.heldBytes).toBe(before - gone);
  });

  test('an event larger than a session may keep is sent but not kept', async () => {
    const budget = new EventBudget({ sessionBytes: 64 * KiB, totalBytes: 1000 * KiB });
    const store = budget.store();
    const small = await store.storeEvent('s', message(KiB, 1));
    const big = await store.storeEvent('s', message(100 * KiB, 2));
    expect(store.holds(big)).toBe(false);
    expect(store.holds(small)).toBe(false);
    expect(store.heldBytes).toBe(0);
    expect(budget.heldBytes).toBe(0);
  });
});
