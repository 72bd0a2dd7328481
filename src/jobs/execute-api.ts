// Runs one job on an HTTP API backend: finds the key, calls the
// backend under the shared failure policy (backends/http-policy.ts), and maps the classified
// outcome to a job state. The run's folder gets the same two logs as a CLI run: stdout.log
// holds the answer, stderr.log one line per attempt and wait (never the key).
import { appendFileSync, writeFileSync } from 'node:fs';
import { DEFAULT_POLICY, failureOf, failureOutcome, ApiFailure, type PolicyKnobs } from '../../backends/http-policy.js';
import type { ApiBackend, ApiCallContext, Outcome } from '../../backends/types.js';
import type { Context } from '../config/context.js';
import type { ExecutionResult, Executor, JobRecord } from './table.js';
import { findApiKey } from '../config/keys.js';
import { makeDirs, PRIVATE_FILE } from '../lib/fs.js';

const MAX_TAIL_LINES = 50;

/**
 * Test and tuning knobs, from the environment: POLYSPAWN_API_RETRY_AFTER_CAP_S (0-30, default
 * 30) lowers the longest honoured retry-after; POLYSPAWN_API_BACKOFF_MS (0-30000, default 1000)
 * sets the first backoff when the server names no wait. Bad values fall back to the defaults.
 */
export function policyKnobs(env: NodeJS.ProcessEnv): { knobs: Partial<PolicyKnobs>; problems: string[] } {
  const knobs: Partial<PolicyKnobs> = {};
  const problems: string[] = [];
  const read = (name: string, max: number): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    const n = Number(raw);
    if (Number.isFinite(n) && n >= 0 && n <= max) return n;
    problems.push(`${name}=${raw} is not a number from 0 to ${max}: using the default`);
    return undefined;
  };
  const cap = read('POLYSPAWN_API_RETRY_AFTER_CAP_S', DEFAULT_POLICY.retryAfterCapMs / 1000);
  if (cap !== undefined) knobs.retryAfterCapMs = cap * 1000;
  const backoff = read('POLYSPAWN_API_BACKOFF_MS', 30_000);
  if (backoff !== undefined) knobs.backoffMs = backoff;
  return { knobs, problems };
}

export async function executeApi(
  backend: ApiBackend,
  job: Readonly<JobRecord>,
  { config, env, secrets }: Pick<Context, 'config' | 'env' | 'secrets'>,
  control: Parameters<Executor>[1],
  paths: { dir: string; stdout: string; stderr: string },
): Promise<ExecutionResult> {
  const logs = runLogs(paths, control);
  // The key files' values join the redactor here (findApiKey), before anything is written.
  const key = findApiKey(backend, config, env, secrets);
  if (!key.found) {
    // The spawn tool refuses this up front; a key removed while the job was queued lands here.
    logs.log(`no request sent: ${key.detail}`);
    return { state: 'failed', outcome: failureOutcome(new ApiFailure('auth', `auth: ${key.detail}`, { attempts: 0 })) };
  }
  const baseUrl = config.backends[backend.name]!.baseUrl;
  const ctx = callContext(backend, job, env, key, baseUrl, control.signal, logs.log);
  // Secrets out of the answer before it reaches stdout.log (the guard redacts the rest).
  const outcome = secrets.deep(await callBackend(backend, job, ctx));
  logs.answer(outcome.ok ? outcome.text : '');
  if (!outcome.ok) logs.log(outcome.error ?? 'failed');
  return jobState(outcome, control.signal);
}

/**
 * The run's two logs, best effort: a run store that cannot be written (read-only, full) must not
 * fail the call; the attempt lines stay in memory for the live tail.
 */
function runLogs(paths: { dir: string; stdout: string; stderr: string }, control: Parameters<Executor>[1]) {
  let logsWritable = true;
  const logFile = (write: () => void) => {
    if (!logsWritable) return;
    try {
      write();
    } catch {
      logsWritable = false;
    }
  };
  logFile(() => {
    makeDirs(paths.dir);
    writeFileSync(paths.stdout, '', { mode: PRIVATE_FILE });
    writeFileSync(paths.stderr, '', { mode: PRIVATE_FILE });
  });
  const lines: string[] = [];
  const log = (line: string) => {
    const stamped = `${new Date().toISOString()} ${line}`;
    lines.push(stamped);
    if (lines.length > MAX_TAIL_LINES) lines.shift();
    logFile(() => appendFileSync(paths.stderr, `${stamped}\n`));
  };
  control.onOutputTail((maxChars) => lines.join('\n').slice(-maxChars));
  return { log, answer: (text: string) => logFile(() => appendFileSync(paths.stdout, text)) };
}

/** What the backend's call is given: the key, where to send it, the policy, and how to say which setting to fix. */
function callContext(
  backend: ApiBackend,
  job: Readonly<JobRecord>,
  env: NodeJS.ProcessEnv,
  key: { key: string; source: string; name: string },
  baseUrl: string | undefined,
  signal: AbortSignal,
  log: (line: string) => void,
): ApiCallContext {
  const { knobs, problems } = policyKnobs(env);
  for (const p of problems) log(p);
  log(
    `${backend.name}: model ${job.model}, key from ${key.source}, base URL ${baseUrl ?? 'the vendor default'}, timeout ${job.timeoutS} s`,
  );
  return {
    signal,
    env,
    key: key.key,
    baseUrl: baseUrl || undefined,
    timeoutMs: job.timeoutS * 1000,
    policy: knobs,
    hints: {
      key: key.source.startsWith('env ') ? `${key.name} (environment variable)` : key.source,
      baseUrl: `POLYSPAWN_${backend.name.toUpperCase()}_BASE_URL or backends.${backend.name}.base_url`,
    },
    log,
  };
}

/** The backend's outcome; a backend that throws is an internal error, never a crash. */
async function callBackend(backend: ApiBackend, job: Readonly<JobRecord>, ctx: ApiCallContext): Promise<Outcome> {
  try {
    return await backend.call(
      {
        prompt: job.prompt,
        model: job.model,
        cwd: job.cwd,
        systemPrompt: job.systemPrompt || undefined,
        extra: job.extra,
      },
      ctx,
    );
  } catch (error) {
    return {
      ok: false,
      text: '',
      error: `internal error in ${backend.name}: ${(error as Error)?.message ?? String(error)}`,
      costSource: 'unknown',
    };
  }
}

function jobState(outcome: Outcome, signal: AbortSignal): ExecutionResult {
  const failure = failureOf(outcome);
  if (outcome.ok) return { state: 'succeeded', outcome };
  if (signal.aborted || failure?.kind === 'cancelled')
    return { state: 'cancelled', outcome: { ...outcome, error: 'cancelled' } };
  if (failure?.kind === 'timeout') return { state: 'timed_out', outcome };
  return { state: 'failed', outcome };
}
