// The one way to wait for something that only an event can change (no polling anywhere).

type WaitUntil<T> = {
  /** Adds a listener for the events that may make `ready` true; returns what removes it. */
  subscribe: (wake: () => void) => () => void;
  /** The value to settle with once the wait is over, or undefined while it is not. */
  ready: () => T | undefined;
  /** The value to settle with when the time is up or the signal aborts. */
  expired: () => T;
  /** Unset: no time limit. */
  timeoutMs?: number;
  signal?: AbortSignal;
};

/**
 * Settles with `ready()`'s value as soon as it has one (at once, or after an event woke the
 * wait), or with `expired()` once `timeoutMs` has passed or `signal` aborts (at once if it has
 * already). However it ends, the listener, the timer and the abort handler are removed.
 */
export function waitUntil<T>({ subscribe, ready, expired, timeoutMs, signal }: WaitUntil<T>): Promise<T> {
  const now = ready();
  if (now !== undefined) return Promise.resolve(now);
  if (signal?.aborted) return Promise.resolve(expired());
  return new Promise((resolve) => {
    let settled = false;
    const finish = (value: T) => {
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      unsubscribe();
      resolve(value);
    };
    const onAbort = () => {
      if (!settled) finish(expired());
    };
    const timer = timeoutMs === undefined ? undefined : setTimeout(onAbort, timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    const unsubscribe = subscribe(() => {
      // An emitter calls every listener it had when the event began, one removed meanwhile too.
      if (settled) return;
      const value = ready();
      if (value !== undefined) finish(value);
    });
  });
}
