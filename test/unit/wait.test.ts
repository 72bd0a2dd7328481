// waitUntil, the one way a wait is written (src/lib/wait.ts): woken by events, never by
// polling; over at once when it can be; and however it ends, it leaves no listener behind.
import { EventEmitter } from 'node:events';
import { describe, expect, test } from 'vitest';
import { waitUntil } from '../../src/lib/wait.js';

const LONG_MS = 60_000;

/** A value that changes only with a `change` event, and the wait's options over it. */
function watched() {
  const events = new EventEmitter();
  let value: string | undefined;
  let checks = 0;
  return {
    events,
    set(next: string | undefined) {
      value = next;
      events.emit('change');
    },
    get checks() {
      return checks;
    },
    options: {
      subscribe: (wake: () => void) => {
        events.on('change', wake);
        return () => events.off('change', wake);
      },
      ready: () => (checks++, value),
      expired: () => 'expired',
    },
  };
}

describe('waitUntil', () => {
  test('over at once when it is ready, or when the signal has aborted already: nothing subscribed', async () => {
    const w = watched();
    w.set('now');
    expect(await waitUntil({ ...w.options, timeoutMs: LONG_MS })).toBe('now');
    w.set(undefined);
    expect(await waitUntil({ ...w.options, timeoutMs: LONG_MS, signal: AbortSignal.abort() })).toBe('expired');
    expect(w.events.listenerCount('change')).toBe(0);
  });

  test('woken by each event, settles with the first value ready gives, then stops listening', async () => {
    const w = watched();
    const wait = waitUntil({ ...w.options, timeoutMs: LONG_MS });
    expect(w.events.listenerCount('change')).toBe(1);
    w.set(undefined); // an event that does not end it
    w.set('done');
    w.set('later');
    expect(await wait).toBe('done');
    expect(w.checks).toBe(3); // at once, then once per event until it was ready
    expect(w.events.listenerCount('change')).toBe(0);
  });

  test('the time-out and the abort settle with expired(), and stop listening', async () => {
    const w = watched();
    expect(await waitUntil({ ...w.options, timeoutMs: 10 })).toBe('expired');
    expect(w.events.listenerCount('change')).toBe(0);
    const controller = new AbortController();
    const wait = waitUntil({ ...w.options, timeoutMs: LONG_MS, signal: controller.signal });
    controller.abort();
    expect(await wait).toBe('expired');
    expect(w.events.listenerCount('change')).toBe(0);
    w.set('after'); // no listener left to ask ready again
    expect(w.checks).toBe(2);
  });

  test('a listener the emitter still calls after the wait ended is not asked again', async () => {
    const w = watched();
    const controller = new AbortController();
    // Registered first: it ends the wait within the event that would also wake it.
    w.events.on('change', () => controller.abort());
    const wait = waitUntil({ ...w.options, timeoutMs: LONG_MS, signal: controller.signal });
    w.set('too late');
    expect(await wait).toBe('expired');
    expect(w.checks).toBe(1);
  });
});
