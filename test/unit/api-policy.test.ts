// The shared failure policy of the API backends (backends/http-policy.ts), without any SDK:
// `run` uses attempt.fetch, and the global fetch behind it is stubbed (or, for connection
// errors, a real fetch to a closed port). Waits are tiny, or driven by vitest's fake clock. Where
// a wait must be cut short (a cancel, a deadline), what it would otherwise take is 20 s or more
// and the bound is a few seconds: wide apart, on a busy machine too.
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, test, vi } from 'vitest';
import {
  ApiFailure,
  connectionCause,
  emptyAnswer,
  failureOf,
  failureOutcome,
  loadSdk,
  makeUsage,
  retryAfterMs,
  vendorMessage,
  withPolicy,
  type Attempt,
} from '../../backends/http-policy.js';
import type { ApiCallContext } from '../../backends/types.js';

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

type Reply = { status: number; body?: string; headers?: Record<string, string> } | 'hang' | Error;

/** Stubs the global fetch with a script of replies; returns the calls it saw. */
function script(replies: Reply[]) {
  const calls: string[] = [];
  vi.stubGlobal('fetch', (input: string | URL | Request, init?: RequestInit) => {
    calls.push(String(input));
    const reply = replies[Math.min(calls.length - 1, replies.length - 1)]!;
    if (reply instanceof Error) return Promise.reject(reply);
    if (reply === 'hang') {
      return new Promise((_, reject) => {
        const signal = init?.signal;
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    }
    return Promise.resolve(new Response(reply.body ?? '{"ok":true}', { status: reply.status, headers: reply.headers }));
  });
  return calls;
}

/** What an SDK does: fetch, throw on a non-2xx, parse JSON. */
const sdkLike = async (a: Attempt) => {
  const res = await a.fetch('http://api.test/v1/x', { method: 'POST', signal: a.signal });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  return (await res.json()) as unknown;
};

const ctx = (over: Partial<ApiCallContext> = {}): ApiCallContext => ({
  signal: new AbortController().signal,
  key: 'k',
  policy: { backoffMs: 1 },
  hints: { key: 'TEST_API_KEY' },
  ...over,
});

async function failure(p: Promise<unknown>): Promise<ApiFailure> {
  try {
    await p;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiFailure);
    return error as ApiFailure;
  }
  throw new Error('expected a failure');
}

describe('withPolicy', () => {
  test('success on the first attempt', async () => {
    const calls = script([{ status: 200, body: '{"a":1}' }]);
    const r = await withPolicy('Vendor', ctx(), sdkLike);
    expect(r).toMatchObject({ value: { a: 1 }, attempts: 1 });
    expect(calls).toHaveLength(1);
  });

  test('429 with retry-after: waits that long, then succeeds', async () => {
    const calls = script([{ status: 429, headers: { 'retry-after': '0.05' } }, { status: 200 }]);
    const lines: string[] = [];
    const t0 = Date.now();
    const r = await withPolicy('Vendor', ctx({ log: (l) => lines.push(l) }), sdkLike);
    expect(r.attempts).toBe(2);
    expect(calls).toHaveLength(2);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45);
    expect(lines.join('\n')).toMatch(
      /waiting 0\.1 s before attempt 2 \(retry-after 0\.1 s\)|waiting 0 s before attempt 2/,
    );
  });

  test('429 always: rate_limited after exactly 3 attempts, with what to do', async () => {
    const calls = script([{ status: 429, headers: { 'retry-after': '0' }, body: '{"error":{"message":"slow down"}}' }]);
    const f = await failure(withPolicy('Vendor', ctx(), sdkLike));
    expect(calls).toHaveLength(3);
    expect(f.kind).toBe('rate_limited');
    expect(f.details).toMatchObject({ status: 429, attempts: 3 });
    expect(f.message).toMatch(
      /^rate_limited: Vendor is rate limiting this key \(HTTP 429: slow down\); gave up after 3 attempts .*Wait a minute/,
    );
  });

  test('a retry-after above 30 s is capped at 30 s (fake clock)', async () => {
    vi.useFakeTimers();
    const calls = script([{ status: 429, headers: { 'retry-after': '120' } }, { status: 200 }]);
    const done = withPolicy('Vendor', ctx(), sdkLike);
    await vi.advanceTimersByTimeAsync(29_900);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(200);
    expect(calls).toHaveLength(2);
    await expect(done).resolves.toMatchObject({ attempts: 2 });
  });

  test('the cap can be lowered, never raised', async () => {
    vi.useFakeTimers();
    const calls = script([{ status: 429, headers: { 'retry-after': '120' } }, { status: 200 }]);
    const done = withPolicy('Vendor', ctx({ policy: { retryAfterCapMs: 3_600_000 } }), sdkLike);
    await vi.advanceTimersByTimeAsync(30_100);
    expect(calls).toHaveLength(2);
    await done;
  });

  test('never more than 3 attempts, whatever the knob says', async () => {
    const calls = script([{ status: 503 }]);
    const f = await failure(withPolicy('Vendor', ctx({ policy: { maxAttempts: 10, backoffMs: 1 } }), sdkLike));
    expect(calls).toHaveLength(3);
    expect(f.kind).toBe('server');
  });

  test('5xx then success: retried with backoff', async () => {
    const calls = script([{ status: 502 }, { status: 500 }, { status: 200 }]);
    const r = await withPolicy('Vendor', ctx(), sdkLike);
    expect(r.attempts).toBe(3);
    expect(calls).toHaveLength(3);
  });

  test('500 always: server, names the status and the vendor message', async () => {
    script([{ status: 500, body: '{"error":{"message":"boom"}}' }]);
    const f = await failure(withPolicy('Vendor', ctx(), sdkLike));
    expect(f.message).toBe(
      'server: Vendor failed (HTTP 500: boom) on 3 attempts. The service is having trouble: try again later',
    );
  });

  test.each([
    [401, '{"error":{"message":"bad key"}}', 'auth'],
    [403, '{"message":"no credits"}', 'auth'],
    [
      400,
      '{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}',
      'auth',
    ],
    [400, '{"error":{"message":"bad temperature"}}', 'bad_request'],
    [404, '{"error":{"message":"model not found"}}', 'bad_request'],
    [422, '{"detail":"invalid"}', 'bad_request'],
  ] as const)('HTTP %i is %s after one attempt', async (status, body, kind) => {
    const calls = script([{ status, body }]);
    const f = await failure(withPolicy('Vendor', ctx(), sdkLike));
    expect(calls).toHaveLength(1);
    expect(f.kind).toBe(kind);
    if (kind === 'auth') expect(f.message).toContain('Check TEST_API_KEY');
    if (kind === 'bad_request') expect(f.message).toContain('Check the model name');
  });

  test('a 2xx body that is not JSON: bad_response, not retried', async () => {
    const calls = script([{ status: 200, body: '{"broken": no' }]);
    const f = await failure(withPolicy('Vendor', ctx(), sdkLike));
    expect(calls).toHaveLength(1);
    expect(f.kind).toBe('bad_response');
    expect(f.message).toMatch(/^bad_response: Vendor's reply could not be read \(SyntaxError: /);
  });

  test('connection refused: server, retried, names the cause and the base URL setting', async () => {
    const port = await closedPort();
    const f = await failure(
      withPolicy(
        'Vendor',
        ctx({ baseUrl: `http://127.0.0.1:${port}`, hints: { baseUrl: 'POLYSPAWN_X_BASE_URL' } }),
        async (a) => {
          const res = await a.fetch(`http://127.0.0.1:${port}/v1/x`, { signal: a.signal });
          return res.json();
        },
      ),
    );
    expect(f.kind).toBe('server');
    expect(f.details.attempts).toBe(3);
    expect(f.message).toMatch(
      /could not reach Vendor at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\) in 3 attempts.*POLYSPAWN_X_BASE_URL/,
    );
  });

  test('timeout: the attempt is aborted at the deadline, and not retried', async () => {
    const calls = script(['hang']);
    const t0 = Date.now();
    const f = await failure(withPolicy('Vendor', ctx({ timeoutMs: 100 }), sdkLike));
    expect(Date.now() - t0).toBeLessThan(5000); // never answered: without the deadline, a hang
    expect(calls).toHaveLength(1);
    expect(f.kind).toBe('timeout');
    expect(f.message).toMatch(/^timeout: no answer from Vendor within 0\.1 s \(timeout_s\)\. Raise timeout_s/);
  });

  test('a retry that would cross the deadline is not attempted', async () => {
    const calls = script([{ status: 429, headers: { 'retry-after': '20' } }, { status: 200 }]);
    const t0 = Date.now();
    const f = await failure(withPolicy('Vendor', ctx({ timeoutMs: 10_000 }), sdkLike));
    expect(Date.now() - t0).toBeLessThan(5000); // not the 10 s to the deadline, nor the 20 s asked for
    expect(calls).toHaveLength(1);
    expect(f.kind).toBe('rate_limited');
    expect(f.message).toContain('no time left within timeout_s to wait 20 s and retry');
  });

  test('cancel during a request: cancelled at once', async () => {
    script(['hang']);
    const controller = new AbortController();
    const done = withPolicy('Vendor', ctx({ signal: controller.signal, timeoutMs: 30_000 }), sdkLike);
    setTimeout(() => controller.abort(), 20);
    const t0 = Date.now();
    const f = await failure(done);
    expect(Date.now() - t0).toBeLessThan(5000); // not the 30 s to the deadline
    expect(f.kind).toBe('cancelled');
  });

  test('cancel during the wait before a retry: cancelled at once, no further request', async () => {
    const calls = script([{ status: 429, headers: { 'retry-after': '20' } }, { status: 200 }]);
    const controller = new AbortController();
    const done = withPolicy('Vendor', ctx({ signal: controller.signal }), sdkLike);
    setTimeout(() => controller.abort(), 50);
    const t0 = Date.now();
    const f = await failure(done);
    expect(Date.now() - t0).toBeLessThan(5000); // not the 20 s asked for
    expect(f.kind).toBe('cancelled');
    expect(calls).toHaveLength(1);
  });

  test('already cancelled: nothing is sent', async () => {
    const calls = script([{ status: 200 }]);
    const controller = new AbortController();
    controller.abort();
    const f = await failure(withPolicy('Vendor', ctx({ signal: controller.signal }), sdkLike));
    expect(f.kind).toBe('cancelled');
    expect(calls).toHaveLength(0);
  });

  test('the attempt signal reaches fetch even when the SDK passes none', async () => {
    script(['hang']);
    const f = await failure(withPolicy('Vendor', ctx({ timeoutMs: 50 }), (a) => a.fetch('http://api.test/')));
    expect(f.kind).toBe('timeout');
  });
});

describe('loadSdk', () => {
  test('returns the module, or gives up at once when cancelled during a slow import', async () => {
    expect(await loadSdk('Vendor', ctx(), async () => 'mod')).toBe('mod');
    const controller = new AbortController();
    const slow = new Promise<string>((r) => setTimeout(() => r('late'), 30_000).unref());
    setTimeout(() => controller.abort(), 20);
    const t0 = Date.now();
    const f = await failure(loadSdk('Vendor', ctx({ signal: controller.signal }), () => slow));
    expect(f.kind).toBe('cancelled');
    expect(Date.now() - t0).toBeLessThan(5000); // not the import's 30 s
  });
});

describe('helpers', () => {
  test('retryAfterMs: seconds, milliseconds, an HTTP date, Gemini RetryInfo', () => {
    const h = (o: Record<string, string>) => new Headers(o);
    expect(retryAfterMs(h({ 'retry-after': '2' }), undefined)).toBe(2000);
    expect(retryAfterMs(h({ 'retry-after': '1.5' }), undefined)).toBe(1500);
    expect(retryAfterMs(h({ 'retry-after-ms': '250', 'retry-after': '9' }), undefined)).toBe(250);
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs(h({ 'retry-after': 'Thu, 01 Jan 2026 00:00:07 GMT' }), undefined, now)).toBe(7000);
    expect(
      retryAfterMs(
        h({}),
        '{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}',
      ),
    ).toBe(37_000);
    expect(retryAfterMs(h({ 'retry-after': 'soon' }), undefined)).toBeUndefined();
    expect(retryAfterMs(undefined, undefined)).toBeUndefined();
  });

  test('vendorMessage: OpenAI, Gemini and Mistral error bodies, and plain text', () => {
    expect(vendorMessage('{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}')).toBe(
      'Incorrect API key',
    );
    expect(vendorMessage('{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}')).toBe(
      'Resource exhausted',
    );
    expect(vendorMessage('{"object":"error","message":"Unauthorized","type":"unauthorized"}')).toBe('Unauthorized');
    expect(vendorMessage('<html>Bad   Gateway</html>')).toBe('<html>Bad Gateway</html>');
    expect(vendorMessage('')).toBeUndefined();
    expect(vendorMessage('x'.repeat(1000))!.length).toBe(300);
  });

  test('connectionCause looks through wrapped errors', () => {
    const inner = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const fetchFailed = new TypeError('fetch failed', { cause: inner });
    expect(connectionCause(fetchFailed)).toBe('ECONNREFUSED');
    expect(connectionCause(new Error('Connection error.', { cause: fetchFailed }))).toBe('ECONNREFUSED');
    expect(connectionCause(new TypeError('terminated'))).toBe('terminated');
    expect(connectionCause(new SyntaxError('Unexpected token'))).toBeUndefined();
  });

  test('makeUsage never lets cached exceed input, and ignores junk', () => {
    expect(makeUsage(12, 7, 0)).toEqual({ inputTokens: 12, outputTokens: 7, cachedInputTokens: 0 });
    expect(makeUsage(10, 5, 50)).toEqual({ inputTokens: 10, outputTokens: 5, cachedInputTokens: 10 });
    expect(makeUsage(undefined, null, 'x')).toEqual({ inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 });
  });

  test('failure outcomes carry their kind; empty answers keep their usage', () => {
    const o = failureOutcome(new ApiFailure('server', 'server: x', { status: 503, attempts: 3 }));
    expect(o).toMatchObject({ ok: false, error: 'server: x', costSource: 'unknown' });
    expect(failureOf(o)).toEqual({ kind: 'server', status: 503, attempts: 3 });
    const e = emptyAnswer('Vendor', 'length', 1, makeUsage(3, 4, 0), { id: 'r1' });
    expect(e.error).toBe(
      'bad_response: Vendor returned an empty answer (finish reason: length). Raise max_output_tokens',
    );
    expect(e.usage).toEqual({ inputTokens: 3, outputTokens: 4, cachedInputTokens: 0 });
    expect(failureOf(e)?.kind).toBe('bad_response');
    expect(
      failureOf({ ok: true, text: 'x', costSource: 'unknown', raw: { failure: { kind: 'nope' } } }),
    ).toBeUndefined();
  });
});

/** A port nothing listens on: bind one, note it, close it. */
async function closedPort(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
