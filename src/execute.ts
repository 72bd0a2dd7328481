// Runs one job on its backend and turns what happened into a final state and an Outcome.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Backend, CliBackend, CliResult, Outcome, Usage } from '../backends/types.js';
import type { Config } from './config.js';
import { executeApi } from './execute-api.js';
import type { ExecutionResult, Executor, JobRecord } from './jobs.js';
import { estimateCost, type ModelsTable } from './models.js';
import { runProcess } from './runner.js';

export const runDir = (config: Config, id: string) => join(config.stateDir, 'runs', id);
export const logPaths = (config: Config, id: string) => ({
  stdout: join(runDir(config, id), 'stdout.log'),
  stderr: join(runDir(config, id), 'stderr.log'),
});

export function createExecutor(backends: readonly Backend[], config: Config, models: ModelsTable): Executor {
  const byName = new Map(backends.map((b) => [b.name, b]));
  return async (job, control) => {
    const backend = byName.get(job.backend);
    if (!backend) throw new Error(`no backend named ${job.backend}`);
    const result =
      backend.kind === 'cli'
        ? await executeCli(backend, job, config, control)
        : await executeApi(backend, job, config, control, { dir: runDir(config, job.id), ...logPaths(config, job.id) });
    const { outcome } = result;
    if (outcome.sessionTotals && !outcome.usage) {
      outcome.usage = job.previousSessionTotals ? subtractUsage(outcome.sessionTotals, job.previousSessionTotals) : outcome.sessionTotals;
    }
    if (outcome.costSource === 'unknown' && outcome.usage) {
      const cost = estimateCost(models, job.backend, job.model, outcome.usage);
      if (cost !== undefined) Object.assign(outcome, { costUsd: cost, costSource: 'estimated' });
    }
    return result;
  };
}

/** This turn's share of a session's running totals (never negative: totals can be reset). */
function subtractUsage(total: Usage, before: Usage): Usage {
  const less = (a: number, b: number) => (a >= b ? a - b : a);
  return {
    inputTokens: less(total.inputTokens, before.inputTokens),
    outputTokens: less(total.outputTokens, before.outputTokens),
    cachedInputTokens: less(total.cachedInputTokens, before.cachedInputTokens),
  };
}

async function executeCli(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  config: Config,
  control: Parameters<Executor>[1],
): Promise<ExecutionResult> {
  const dir = runDir(config, job.id);
  mkdirSync(dir, { recursive: true });
  const settings = config.backends[backend.name]!;
  const spec = backend.command(
    {
      prompt: job.prompt,
      model: job.model,
      cwd: job.cwd,
      ...(job.systemPrompt ? { systemPrompt: job.systemPrompt } : {}),
      ...(job.resumeSessionId ? { resumeSessionId: job.resumeSessionId } : {}),
      extra: job.extra,
    },
    settings,
    { scratchDir: dir },
  );
  for (const [path, content] of Object.entries(spec.files ?? {})) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  }
  const logs = logPaths(config, job.id);
  const running = runProcess({
    file: spec.file,
    args: spec.args,
    env: spec.env,
    cwd: job.cwd,
    stdin: spec.stdin,
    stdoutLog: logs.stdout,
    stderrLog: logs.stderr,
    timeoutMs: job.timeoutS * 1000,
    graceMs: config.killGraceMs,
    signal: control.signal,
  });
  control.onOutputTail(running.tail);
  if (running.pid !== undefined) control.onProcessGroup?.(running.pid);
  const run = await running.done;

  const failed = (error: string): Outcome => ({ ok: false, text: '', error, costSource: 'unknown' });
  if (run.end === 'spawn_error') {
    return {
      state: 'failed',
      outcome: failed(`could not start ${spec.file}: ${run.spawnError}. ${capitalize(backend.installHint)}, or set ${backend.binEnv} to its path`),
    };
  }
  const artifacts: CliResult['artifacts'] = {};
  for (const [name, path] of Object.entries(spec.artifacts ?? {})) artifacts[name] = readIfPresent(path);
  const outcome = backend.parse({ ...run, artifacts });

  if (run.end === 'timeout') {
    return { state: 'timed_out', exitCode: run.exitCode, outcome: { ...outcome, ok: false, error: `timed out after ${job.timeoutS} s and was stopped; raise timeout_s if it needs longer (log: ${logs.stdout})` } };
  }
  if (run.end === 'cancelled') {
    return { state: 'cancelled', exitCode: run.exitCode, outcome: { ...outcome, ok: false, error: 'cancelled' } };
  }
  if (!outcome.ok) outcome.error = `${outcome.error ?? 'failed'} (log: ${logs.stdout})`;
  return { state: outcome.ok ? 'succeeded' : 'failed', exitCode: run.exitCode, outcome };
}

function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
