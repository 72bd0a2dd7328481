// The one failure policy of the HTTP API backends, so they behave alike whatever their SDKs do by
// default: retries, timeouts, cancel, and every failure classified with a message that says what
// to do. Each backend turns its SDK's own retries and timeouts off and hands it `attempt.fetch`,
// which records what the server answered: classification never depends on an SDK's error classes.
import { z } from 'zod';
import type { ApiCallContext, Outcome, Usage } from './types.js';

const FAILURE_KINDS = [
  'auth',
  'rate_limited',
  'server',
  'timeout',
  'bad_response',
  'bad_request',
  'cancelled',
] as const;
type FailureKind = (typeof FAILURE_KINDS)[number];

export type PolicyKnobs = {
  /** Attempts in all, the first included (never more than 3). */
  maxAttempts: number;
  /** The longest wait a retry-after can ask for (never more than 30 s). */
  retryAfterCapMs: number;
  /** First backoff when the server gave no retry-after; doubles per retry. */
  backoffMs: number;
};

export const DEFAULT_POLICY: Readonly<PolicyKnobs> = { maxAttempts: 3, retryAfterCapMs: 30_000, backoffMs: 1_000 };

// ---------------------------------------------------------------------------------------------
// Tool inputs every API backend takes beyond the common ones.

export const apiExtraInput = {
  max_output_tokens: z.number().int().min(1).max(1_000_000).optional().describe("Default: the model's limit"),
  temperature: z.number().min(0).max(2).optional().describe('0 to 2 (reasoning models may ignore it)'),
} satisfies z.ZodRawShape;

/** The validated extra inputs, read back from the job's `extra` record. */
export function apiOptions(extra: Record<string, unknown>): { maxOutputTokens?: number; temperature?: number } {
  const out: { maxOutputTokens?: number; temperature?: number } = {};
  if (typeof extra.max_output_tokens === 'number') out.maxOutputTokens = extra.max_output_tokens;
  if (typeof extra.temperature === 'number') out.temperature = extra.temperature;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Failures.

export class ApiFailure extends Error {
  override readonly name = 'ApiFailure';
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly details: { status?: number; attempts: number; elapsedMs?: number } = { attempts: 0 },
  ) {
    super(message);
  }
}

const RETRYABLE: ReadonlySet<FailureKind> = new Set(['rate_limited', 'server']);

/** What one attempt's failure was, before it is worded for the user. */
type Classified = {
  kind: FailureKind;
  status?: number;
  /** The vendor's own error message, shortened. */
  vendorMessage?: string;
  /** For connection errors: the lowest cause (ECONNREFUSED, ...). */
  cause?: string;
  /** For bad responses: what could not be read. */
  detail?: string;
  retryAfterMs?: number;
};

type Seen = { status?: number; headers?: Headers; body?: Promise<string> };

const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
]);

function errorChain(error: unknown): Array<Record<string, unknown>> {
  const chain: Array<Record<string, unknown>> = [];
  let current: unknown = error;
  for (let i = 0; i < 6 && typeof current === 'object' && current !== null; i++) {
    chain.push(current as Record<string, unknown>);
    current = (current as { cause?: unknown }).cause;
  }
  return chain;
}

/** A failure to connect or a connection lost mid-answer, whatever the SDK wrapped it in. */
export function connectionCause(error: unknown): string | undefined {
  for (const e of errorChain(error)) {
    const code = typeof e.code === 'string' ? e.code : undefined;
    if (code && NETWORK_CODES.has(code)) return code;
  }
  for (const e of errorChain(error)) {
    const name = String(e.name ?? '');
    const message = String(e.message ?? '');
    // Mistral's ConnectionError names itself; openai's APIConnectionError is named "Error".
    const ctor = (e.constructor as { name?: string } | undefined)?.name;
    if (name === 'ConnectionError' || ctor === 'APIConnectionError' || ctor === 'ConnectionError')
      return message || 'connection error';
    if (name === 'TypeError' && /fetch failed|terminated|network|socket/i.test(message)) return message;
    if (name === 'SocketError' || /other side closed/i.test(message)) return message || 'socket closed';
  }
  return undefined;
}

/** The vendor's error message from an error body: OpenAI/Gemini `error.message`, Mistral `message`. */
export function vendorMessage(body: string | undefined): string | undefined {
  if (!body) return undefined;
  let text = body;
  try {
    const parsed = JSON.parse(body) as Record<string, unknown>;
    const err = parsed.error;
    const candidate =
      (typeof err === 'object' && err !== null && typeof (err as Record<string, unknown>).message === 'string'
        ? (err as Record<string, unknown>).message
        : undefined) ??
      (typeof err === 'string' ? err : undefined) ??
      (typeof parsed.message === 'string' ? parsed.message : undefined) ??
      (typeof parsed.detail === 'string' ? parsed.detail : undefined);
    if (typeof candidate === 'string') text = candidate;
  } catch {
    // not JSON: use the text itself
  }
  text = text.replace(/\s+/g, ' ').trim();
  if (!text) return undefined;
  return text.length > 300 ? `${text.slice(0, 299)}…` : text;
}

/** Milliseconds the server asked to wait: retry-after-ms, retry-after (seconds or a date), Gemini RetryInfo. */
export function retryAfterMs(
  headers: Headers | undefined,
  body: string | undefined,
  now = Date.now(),
): number | undefined {
  const ms = headers?.get('retry-after-ms');
  if (ms && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.max(0, Number(ms));
  const ra = headers?.get('retry-after')?.trim();
  if (ra) {
    if (/^\d+(\.\d+)?$/.test(ra)) return Math.max(0, Number(ra) * 1000);
    const date = Date.parse(ra);
    if (!Number.isNaN(date)) return Math.max(0, date - now);
  }
  const delay = body && /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(body);
  if (delay) return Number(delay[1]) * 1000;
  return undefined;
}

function fromStatus(status: number, message: string | undefined): FailureKind {
  if (status === 401 || status === 402 || status === 403) return 'auth';
  // Gemini answers a bad key with 400 INVALID_ARGUMENT / API_KEY_INVALID.
  if (status === 400 && message && /API[_ ]KEY[_ ]INVALID|API key not valid|api key expired/i.test(message))
    return 'auth';
  if (status === 429) return 'rate_limited';
  if (status === 408 || status === 409 || status >= 500) return 'server';
  return 'bad_request';
}

async function bodyText(seen: Seen): Promise<string | undefined> {
  if (!seen.body) return undefined;
  // An error body is small; never let reading it hold the job up.
  return Promise.race([seen.body, new Promise<undefined>((r) => setTimeout(() => r(undefined), 2000).unref())]);
}

async function classify(
  error: unknown,
  seen: Seen,
  state: { cancelled: boolean; timedOut: boolean },
): Promise<Classified> {
  if (state.cancelled) return { kind: 'cancelled' };
  if (state.timedOut) return { kind: 'timeout' };
  if (error instanceof ApiFailure) return { kind: error.kind, detail: error.message };
  if (seen.status !== undefined && seen.status >= 400) {
    const body = await bodyText(seen);
    const message = vendorMessage(body);
    const kind = fromStatus(seen.status, body);
    const c: Classified = { kind, status: seen.status, ...(message ? { vendorMessage: message } : {}) };
    const wait = retryAfterMs(seen.headers, body);
    if (wait !== undefined) c.retryAfterMs = wait;
    return c;
  }
  const cause = connectionCause(error);
  if (cause) return { kind: 'server', cause };
  const detail =
    error instanceof Error ? `${error.name === 'Error' ? '' : `${error.name}: `}${error.message}` : String(error);
  if (seen.status !== undefined) return { kind: 'bad_response', status: seen.status, detail: shorten(detail) };
  // Nothing was sent: the SDK refused the request itself (e.g. its own input validation).
  return { kind: 'bad_request', detail: shorten(detail) };
}

const shorten = (s: string) => {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > 300 ? `${one.slice(0, 299)}…` : one;
};

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

function word(
  vendor: string,
  c: Classified,
  attempts: number,
  elapsedMs: number,
  ctx: ApiCallContext,
  note?: string,
): string {
  const http = c.status ? ` (HTTP ${c.status}${c.vendorMessage ? `: ${c.vendorMessage}` : ''})` : '';
  const tries = `${attempts} attempt${attempts === 1 ? '' : 's'}`;
  const extra = note ? `; ${note}` : '';
  switch (c.kind) {
    case 'auth':
      return `auth: ${vendor} rejected the API key${http}. Check ${ctx.hints?.key ?? 'the API key'}: it may be mistyped, revoked, or lack access to this model or to credits`;
    case 'rate_limited':
      return (
        `rate_limited: ${vendor} is rate limiting this key${http}; gave up after ${tries} in ${seconds(elapsedMs)}${extra}. ` +
        "Wait a minute and try again, run fewer agents on this backend at once, or raise the plan's limits"
      );
    case 'server':
      if (c.cause) {
        return (
          `server: could not reach ${vendor} at ${ctx.baseUrl ?? 'its default URL'} (${c.cause}) in ${tries}${extra}. ` +
          `Check the network or proxy${ctx.hints?.baseUrl ? `, and the base URL (${ctx.hints.baseUrl})` : ''}`
        );
      }
      return `server: ${vendor} failed${http} on ${tries}${extra}. The service is having trouble: try again later`;
    case 'timeout':
      return (
        `timeout: no answer from ${vendor} within ${ctx.timeoutMs !== undefined ? seconds(ctx.timeoutMs) : 'the time limit'} (timeout_s)` +
        `${attempts > 1 ? ` over ${tries}` : ''}. Raise timeout_s, ask for a shorter answer (max_output_tokens), or use a faster model`
      );
    case 'bad_response':
      return (
        `bad_response: ${vendor}'s reply could not be read (${c.detail ?? 'unreadable'})` +
        `${ctx.baseUrl ? `; if ${ctx.baseUrl} is a gateway or proxy, check it` : ''}. Try again`
      );
    case 'bad_request':
      return (
        `bad_request: ${vendor} refused the request${http || (c.detail ? ` (${c.detail})` : '')}. ` +
        'Check the model name (models.json) and the inputs (max_output_tokens, temperature)'
      );
    case 'cancelled':
      return `cancelled while waiting for ${vendor}`;
  }
}

// ---------------------------------------------------------------------------------------------
// The fetch every SDK is given.

const UNDICI_DISPATCHER = Symbol.for('undici.globalDispatcher.1');
type Dispatcher = { dispatch(options: Record<string, unknown>, handler: unknown): boolean };

/** Node's own fetch dispatcher, with its 300 s header/body timeouts lifted (ours governs). */
function noTimeoutDispatcher(): Dispatcher | undefined {
  let global = (globalThis as Record<symbol, Dispatcher | undefined>)[UNDICI_DISPATCHER];
  if (!global) {
    new Headers(); // makes Node set up its fetch machinery, and with it the global dispatcher
    global = (globalThis as Record<symbol, Dispatcher | undefined>)[UNDICI_DISPATCHER];
  }
  if (typeof global?.dispatch !== 'function') return undefined;
  const base = global;
  return { dispatch: (options, handler) => base.dispatch({ ...options, headersTimeout: 0, bodyTimeout: 0 }, handler) };
}

/** `attempt.fetch`: the attempt's abort signal on every request; the status, headers and error body recorded for classify(). */
function policyFetch(seen: Seen, signal: AbortSignal): typeof fetch {
  return async (input, init) => {
    const signals = [signal, init?.signal, input instanceof Request ? input.signal : undefined].filter(
      (s): s is AbortSignal => s instanceof AbortSignal,
    );
    const dispatcher = noTimeoutDispatcher();
    const response = await fetch(input, {
      ...init,
      signal: AbortSignal.any(signals),
      ...(dispatcher ? { dispatcher } : {}),
    } as RequestInit);
    seen.status = response.status;
    seen.headers = response.headers;
    if (!response.ok)
      seen.body = response
        .clone()
        .text()
        .catch(() => '');
    return response;
  };
}

// ---------------------------------------------------------------------------------------------
// The loop.

export type Attempt = {
  /** 1, 2, 3 */
  number: number;
  /** Aborts on cancel and at the deadline. Pass it to the SDK too. */
  signal: AbortSignal;
  /** Give this to the SDK as its fetch. */
  fetch: typeof fetch;
  /** Milliseconds left before the deadline (Infinity without one). */
  remainingMs: number;
};

function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const done = (ok: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The call's policy within the defaults: never more attempts or a longer retry-after cap than they allow. */
function policyKnobs(policy: ApiCallContext['policy']): PolicyKnobs {
  return {
    maxAttempts: Math.min(
      DEFAULT_POLICY.maxAttempts,
      Math.max(1, Math.floor(policy?.maxAttempts ?? DEFAULT_POLICY.maxAttempts)),
    ),
    retryAfterCapMs: Math.min(
      DEFAULT_POLICY.retryAfterCapMs,
      Math.max(0, policy?.retryAfterCapMs ?? DEFAULT_POLICY.retryAfterCapMs),
    ),
    backoffMs: Math.max(0, policy?.backoffMs ?? DEFAULT_POLICY.backoffMs),
  };
}

/** The wait before the next attempt: the server's retry-after, capped, else an exponential backoff with jitter. */
function retryWaitMs(asked: number | undefined, attempt: number, knobs: PolicyKnobs): number {
  if (asked !== undefined) return Math.min(asked, knobs.retryAfterCapMs);
  return Math.min(knobs.retryAfterCapMs, knobs.backoffMs * 2 ** (attempt - 1) * (0.8 + 0.4 * Math.random()));
}

/**
 * Runs `run` under the policy. Resolves with its value and the number of attempts made, or
 * rejects with an ApiFailure whose message is ready for the user. Only rate limits and server or
 * connection failures are retried, after the server's retry-after (capped) or an exponential
 * backoff. The job's timeout is each attempt's timeout and the whole call's deadline: a retry
 * whose wait would cross it is not attempted.
 */
export async function withPolicy<T>(
  vendor: string,
  ctx: ApiCallContext,
  run: (attempt: Attempt) => Promise<T>,
): Promise<{ value: T; attempts: number; elapsedMs: number }> {
  const knobs = policyKnobs(ctx.policy);
  const log = ctx.log ?? (() => undefined);
  const started = Date.now();
  const deadline = ctx.timeoutMs !== undefined ? started + ctx.timeoutMs : Infinity;
  const fail = (c: Classified, attempts: number, note?: string): ApiFailure =>
    new ApiFailure(c.kind, word(vendor, c, attempts, Date.now() - started, ctx, note), {
      ...(c.status !== undefined ? { status: c.status } : {}),
      attempts,
      elapsedMs: Date.now() - started,
    });

  for (let number = 1; ; number++) {
    if (ctx.signal.aborted) throw fail({ kind: 'cancelled' }, number - 1);
    const remainingMs = deadline - Date.now();
    if (remainingMs <= 0) throw fail({ kind: 'timeout' }, number - 1);

    const controller = new AbortController();
    let timedOut = false;
    const onCancel = () => controller.abort(ctx.signal.reason);
    ctx.signal.addEventListener('abort', onCancel, { once: true });
    const timer = Number.isFinite(remainingMs)
      ? setTimeout(() => {
          timedOut = true;
          controller.abort(new DOMException(`no answer within ${seconds(ctx.timeoutMs!)}`, 'TimeoutError'));
        }, remainingMs)
      : undefined;
    const seen: Seen = {};
    let classified: Classified;
    try {
      const value = await run({
        number,
        signal: controller.signal,
        fetch: policyFetch(seen, controller.signal),
        remainingMs,
      });
      log(`attempt ${number}: HTTP ${seen.status ?? '?'}, answered in ${seconds(Date.now() - started)}`);
      return { value, attempts: number, elapsedMs: Date.now() - started };
    } catch (error) {
      classified = await classify(error, seen, { cancelled: ctx.signal.aborted, timedOut });
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onCancel);
    }

    const what = classified.status
      ? `HTTP ${classified.status}`
      : (classified.cause ?? classified.detail ?? classified.kind);
    log(`attempt ${number}: ${classified.kind} (${what})`);
    if (!RETRYABLE.has(classified.kind) || number >= knobs.maxAttempts) throw fail(classified, number);

    const asked = classified.retryAfterMs;
    const waitMs = retryWaitMs(asked, number, knobs);
    if (Date.now() + waitMs >= deadline) {
      throw fail(classified, number, `no time left within timeout_s to wait ${seconds(waitMs)} and retry`);
    }
    log(
      `waiting ${seconds(waitMs)} before attempt ${number + 1}` +
        (asked !== undefined
          ? ` (retry-after ${seconds(asked)}${asked > waitMs ? `, capped at ${seconds(knobs.retryAfterCapMs)}` : ''})`
          : ' (backoff)'),
    );
    if (!(await sleep(waitMs, ctx.signal))) throw fail({ kind: 'cancelled' }, number);
  }
}

/**
 * Imports an SDK, giving up at once if the job is cancelled meanwhile: a cold import of the
 * Mistral SDK alone takes most of a second. (The import itself finishes in the background.)
 */
export async function loadSdk<T>(vendor: string, ctx: ApiCallContext, load: () => Promise<T>): Promise<T> {
  const cancelled = () => new ApiFailure('cancelled', `cancelled while waiting for ${vendor}`, { attempts: 0 });
  if (ctx.signal.aborted) throw cancelled();
  let onAbort: () => void = () => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(cancelled());
    ctx.signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([load(), aborted]);
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
  }
}

// ---------------------------------------------------------------------------------------------
// Outcomes.

const count = (n: unknown): number => (typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.round(n) : 0);

export function makeUsage(input: unknown, output: unknown, cached: unknown): Usage {
  return {
    inputTokens: count(input),
    outputTokens: count(output),
    cachedInputTokens: Math.min(count(cached), count(input)),
  };
}

type FailureRecord = { kind: FailureKind; status?: number; attempts: number };

export function failureOutcome(
  failure: ApiFailure,
  extras: { usage?: Usage; raw?: Record<string, unknown> } = {},
): Outcome {
  const record: FailureRecord = {
    kind: failure.kind,
    attempts: failure.details.attempts,
    status: failure.details.status,
  };
  return {
    ok: false,
    text: '',
    error: failure.message,
    usage: extras.usage,
    costSource: 'unknown',
    raw: { ...extras.raw, failure: record },
  };
}

/** The classified failure an API backend's Outcome carries, if it failed. */
export function failureOf(outcome: Outcome): FailureRecord | undefined {
  const raw = outcome.raw as { failure?: FailureRecord } | undefined;
  const f = raw && typeof raw === 'object' ? raw.failure : undefined;
  return f && FAILURE_KINDS.includes(f.kind) ? f : undefined;
}

/** What a backend's call() caught: a classified failure, or (a bug, a missing SDK) an internal error. */
export function toFailureOutcome(error: unknown, vendor: string): Outcome {
  if (error instanceof ApiFailure) return failureOutcome(error);
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, text: '', error: `internal error calling ${vendor}: ${shorten(message)}`, costSource: 'unknown' };
}

/** The answer was read but holds no text: a failure, with the usage that was still billed. */
export function emptyAnswer(
  vendor: string,
  reason: string | undefined,
  attempts: number,
  usage: Usage | undefined,
  raw: Record<string, unknown>,
): Outcome {
  const why = reason ? ` (finish reason: ${reason})` : '';
  const hint =
    reason && /length|max_tokens|MAX_TOKENS/i.test(reason)
      ? 'raise max_output_tokens'
      : 'try again or rephrase the prompt';
  return failureOutcome(
    new ApiFailure('bad_response', `bad_response: ${vendor} returned an empty answer${why}. ${capital(hint)}`, {
      attempts,
    }),
    { usage, raw },
  );
}

const capital = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
