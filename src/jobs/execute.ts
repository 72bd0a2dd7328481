// Runs one job on its backend and turns what happened into a final state and an Outcome.
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Backend, CliBackend, CliResult, Outcome, ParentEndpoint } from '../../backends/types.js';
import { makeDirs, readRegularFile, unwritableBecause, writeNoLink } from '../lib/fs.js';
import { SECRET_NAME } from '../lib/text.js';
import { childNestingEnv, type Nesting } from './agents/nesting.js';
import { agentSettings } from './agents/definitions.js';
import type { Context } from '../config/context.js';
import { executeApi } from './execute-api.js';
import type { ExecutionResult, Executor, JobRecord } from './table.js';
import { estimateCost, estimateCostByModel, type ModelsTable } from '../config/models.js';
import { childEnv, runProcess, type RunResult } from './process/runner.js';
import { containerName, SandboxError, wrapInSandbox, type SandboxRun, type WrappedCommand } from './process/sandbox.js';
import { wrapForRemoteEngine } from './process/remote-engine.js';
import { followLines } from './process/log-reader.js';
import { jsonLines } from '../../backends/jsonl.js';
import { budgetOf, markCostOverrun, thisRunsCost, thisRunsShare, turnMeter, type BudgetHit } from './budget.js';
import { runFolder } from '../lib/run-folder.js';
import { TOKEN_ENV } from '../lib/daemon-file.js';
import { keyFiles } from '../config/keys.js';
import { sharesNoFiles, type SandboxSettings } from '../config/sandbox.js';
import { presetsDir } from './teams/presets.js';
import { worktreePlace } from './worktree/report.js';
import { acpPermission, isAcp } from '../../backends/acp.js';
import type { Questions } from './acp/permission.js';
import {
  ANSWER_WAIT_S,
  PARENT_PROMPT,
  PARENT_SERVER,
  PARENT_TOKEN_ENV,
  type ChannelLease,
  type ParentChannel,
} from './conversation.js';

/** What running a job needs of the app: the configuration, the environment every child or API call starts from, the log, the redactor. */
type ExecutorContext = Pick<Context, 'config' | 'env' | 'log' | 'secrets'>;

export function createExecutor(
  backends: readonly Backend[],
  ctx: ExecutorContext,
  models: ModelsTable,
  /** How deep this polyspawn runs: each CLI child gets the next depth (src/jobs/agents/nesting.ts). */
  nesting: Nesting = { depth: 0, canSpawn: true },
  /** The channel to the orchestrator, where this polyspawn serves one (only an MCP server does). */
  parentChannel: () => ParentChannel | undefined = () => undefined,
  /** Where an ACP agent's permission requests become questions to the orchestrator (the job table). */
  questions?: () => Questions,
): Executor {
  const byName = new Map(backends.map((b) => [b.name, b]));
  const apiKeyNames = backends.flatMap((b) => (b.kind === 'api' ? b.keyNames : []));
  // The same for every job of a backend (and of a named agent): made once, not per job of a burst.
  const environments = new Map<string, ExecutorContext['env']>();
  const environmentFor = (backend: CliBackend, job: Readonly<JobRecord>) => {
    const key = [backend.name, ...(job.agent?.env ?? [])].join('\0');
    let env = environments.get(key);
    if (!env) environments.set(key, (env = cliEnvironment(ctx, backend, job, apiKeyNames)));
    return env;
  };
  return async (job, control) => {
    const backend = byName.get(job.backend);
    if (!backend) throw new Error(`no backend named ${job.backend}`);
    const result =
      backend.kind === 'cli'
        ? await executeCli(
            backend,
            job,
            { ...ctx, env: environmentFor(backend, job) },
            control,
            nesting,
            parentChannel(),
            questions?.(),
          )
        : await executeApi(backend, job, ctx, control, runFolder(ctx.config.stateDir, job.id));
    const { outcome } = result;
    if (outcome.sessionTotals && !outcome.usage)
      outcome.usage = thisRunsShare(outcome.sessionTotals, job.previousSessionTotals);
    if (outcome.sessionCostUsd !== undefined && outcome.costUsd === undefined)
      Object.assign(outcome, {
        costUsd: thisRunsCost(outcome.sessionCostUsd, job.previousSessionCostUsd),
        costSource: 'reported',
      });
    if (outcome.costSource === 'unknown' && outcome.usage) {
      const cost = outcome.usageByModel
        ? estimateCostByModel(models, job.backend, outcome.usageByModel)
        : estimateCost(models, job.backend, job.model, outcome.usage);
      if (cost !== undefined) Object.assign(outcome, { costUsd: cost, costSource: 'estimated' });
    }
    markCostOverrun(job, outcome);
    return result;
  };
}

/**
 * The environment a CLI child starts from: the app's, without the API backends' keys and any
 * variable whose name marks a secret, except what its own CLI signs in with (`loginEnv`) and
 * what the user's config (`backends.<name>.env`) or the agent's definition (`env`) passes on by
 * name. The shared server's token never: with it an agent would drive the server as a client.
 * The channel's token is set after this, by the run itself.
 */
function cliEnvironment(
  { env, config }: ExecutorContext,
  backend: CliBackend,
  job: Readonly<JobRecord>,
  apiKeyNames: readonly string[],
): ExecutorContext['env'] {
  const passed = new Set([...(config.backends[backend.name]?.env ?? []), ...(job.agent?.env ?? [])]);
  const keep = (name: string) =>
    name !== TOKEN_ENV &&
    (passed.has(name) || backend.loginEnv.includes(name) || (!apiKeyNames.includes(name) && !SECRET_NAME.test(name)));
  return Object.fromEntries(Object.entries(env).filter(([name]) => keep(name)));
}

/** The run's lease on the channel, when its backend can take one and nothing turned it off. */
async function openChannel(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  channel: ParentChannel | undefined,
  log: Context['log'],
): Promise<ChannelLease | undefined> {
  if (!channel || !backend.supportsMcpServers || job.askParent === false) return undefined;
  // The channel is reached over the host's loopback, which a sandbox without network does not have.
  if (job.sandbox?.network === false) {
    log(`agent ${job.id} runs without ask_parent: its sandbox has no network`);
    return undefined;
  }
  if (sharesNoFiles(job.sandbox)) {
    log(
      `agent ${job.id} runs without ask_parent: its engine is not this machine, whose loopback the channel listens on`,
    );
    return undefined;
  }
  try {
    return await channel.open(job.id);
  } catch (error) {
    log(`agent ${job.id} runs without ask_parent: the channel could not start (${(error as Error).message})`);
    return undefined;
  }
}

async function executeCli(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  ctx: ExecutorContext,
  control: Parameters<Executor>[1],
  nesting: Nesting,
  channel: ParentChannel | undefined,
  questions: Questions | undefined,
): Promise<ExecutionResult> {
  const lease = await openChannel(backend, job, channel, ctx.log);
  let files: string[] = [];
  try {
    return await runCli(backend, job, ctx, control, { nesting, lease, questions }, (written) => (files = written));
  } finally {
    // The token stops working before anyone hears the job ended; the files the command was
    // given (an agent's MCP servers may hold secrets) go too.
    // A channel that fails to close must not cost the job its outcome.
    await lease
      ?.close()
      .catch((error: Error) => ctx.log(`agent ${job.id}: the channel did not close: ${error.message}`));
    for (const path of files) rmSync(path, { force: true });
  }
}

type RunLogs = ReturnType<typeof runFolder>;
type CommandSpec = ReturnType<CliBackend['command']>;

async function runCli(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  ctx: ExecutorContext,
  control: Parameters<Executor>[1],
  { nesting, lease, questions }: { nesting: Nesting; lease?: ChannelLease; questions?: Questions },
  onFilesWritten: (paths: string[]) => void,
): Promise<ExecutionResult> {
  const { config } = ctx;
  const dir = scratchDirFor(runFolder(config.stateDir, job.id).dir, job.id);
  const spec = cliCommand(backend, job, ctx, nesting, lease, dir);
  onFilesWritten(writeCommandFiles(spec));
  // In the run's folder, or beside the scratch files when the store cannot be written.
  const logs = runFolder(config.stateDir, job.id, dir);
  const command = job.sandbox
    ? await sandboxed(backend, job, job.sandbox, spec, ctx, dir)
    : { file: spec.file, args: spec.args };
  if ('state' in command) return command;
  return runCommand(backend, job, ctx, control, { lease, questions }, spec, command, logs);
}

/**
 * The run's result once its work is back (an engine that shares no files: copied out before its
 * answer is read, within what is left of the run's time-out, `deadline`); a run whose work could
 * not be brought back failed (or timed out), saying where it is. Cancelled or timed out: the
 * container was removed by `stop`, with what was in it.
 */
async function collected(command: WrappedCommand, run: RunResult, deadline: number, result: () => ExecutionResult) {
  const lost = run.end === 'cancelled' || run.end === 'timeout' ? undefined : await command.collect?.(deadline);
  const done = result();
  if (!lost) return done;
  const state = lost.timedOut ? ('timed_out' as const) : ('failed' as const);
  return { ...done, state, outcome: { ...done.outcome, ok: false, error: lost.message } };
}

async function runCommand(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  ctx: ExecutorContext,
  control: Parameters<Executor>[1],
  { lease, questions }: { lease?: ChannelLease; questions?: Questions },
  spec: CommandSpec,
  command: WrappedCommand,
  logs: RunLogs,
): Promise<ExecutionResult> {
  const { config } = ctx;
  // The run is stopped at its time-out; its work is copied out within what is left of it.
  const deadline = Date.now() + job.timeoutS * 1000;
  if (isAcp(backend)) {
    // The ACP SDK (and its schemas) loads with the first ACP run, not at every start.
    const { runAcpSession } = await import('./acp/session.js');
    const { run, hit } = await runAcpSession({
      backend,
      job,
      process: {
        file: command.file,
        args: command.args,
        stop: command.stop,
        passFds: command.fds,
        baseEnv: ctx.env,
        env: spec.env,
        graceMs: config.killGraceMs,
      },
      logs,
      control,
      lease,
      permission: acpPermission(backend, agentSettings(config.backends[backend.name]!, job.agent).permission, job),
      questions,
    });
    return collected(command, run, deadline, () =>
      cliResult(backend, job, spec, command, run, hit, control.signal, logs),
    );
  }
  const { run, hit } = await runFollowingBudget(backend, job, spec, command, ctx, control, logs);
  return collected(command, run, deadline, () =>
    cliResult(backend, job, spec, command, run, hit, control.signal, logs),
  );
}

/** The backend's command for this run: its settings, the channel, the budget, and the depth marker after them. */
function cliCommand(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  { config, env }: ExecutorContext,
  nesting: Nesting,
  lease: ChannelLease | undefined,
  scratchDir: string,
): CommandSpec {
  const settings = agentSettings(config.backends[backend.name]!, job.agent);
  const parent: ParentEndpoint | undefined = lease && {
    name: PARENT_SERVER,
    url: lease.url,
    token: lease.token,
    tokenEnv: PARENT_TOKEN_ENV,
    toolCallS: ANSWER_WAIT_S,
  };
  const systemPrompt = [job.systemPrompt, parent && PARENT_PROMPT].filter(Boolean).join('\n\n');
  const spec = backend.command(
    {
      prompt: job.prompt,
      model: job.model,
      cwd: job.cwd,
      systemPrompt: systemPrompt || undefined,
      resumeSessionId: job.resumeSessionId || undefined,
      outputSchema: job.outputSchema,
      mcpServers: job.agent?.mcpServers,
      budget: budgetOf(job),
      extra: job.extra,
    },
    settings,
    { scratchDir, env, parent },
  );
  // After the backend's own: no backend can drop the depth marker (no runaway nesting).
  spec.env = {
    ...spec.env,
    ...childNestingEnv(nesting, job.agent?.nesting),
    [PARENT_TOKEN_ENV]: parent?.token,
  };
  return spec;
}

/** Writes the files the command is given; returns their paths (removed when the run ends). */
function writeCommandFiles(spec: CommandSpec): string[] {
  const files = Object.entries(spec.files ?? {});
  for (const [path, content] of files) {
    makeDirs(dirname(path));
    // The user's alone: a file may hold a token (the channel's, an MCP server's). Not through a
    // link an earlier attempt's agent left in the run folder.
    writeNoLink(path, content);
  }
  return files.map(([path]) => path);
}

const failed = (error: string): Outcome => ({ ok: false, text: '', error, costSource: 'unknown' });

/**
 * The command wrapped in the job's sandbox (on an engine that shares no files: its container made
 * and its work copied in), or the job failed with why it could not be.
 */
async function sandboxed(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  sandbox: SandboxSettings,
  spec: CommandSpec,
  { config, env }: ExecutorContext,
  runDir: string,
): Promise<WrappedCommand | ExecutionResult> {
  const place = job.isolation === 'worktree' ? worktreePlace(config.stateDir, job.worktreeOf ?? job.id) : undefined;
  const run: SandboxRun = {
    sandbox,
    paths: backend.sandboxPaths,
    modelEndpointEnv: backend.modelEndpointEnv,
    executable: backend.executable,
    file: spec.file,
    args: spec.args,
    env: childEnv({ baseEnv: env, env: spec.env }),
    cwd: job.cwd,
    runDir,
    worktree: place?.path,
    branch: place?.branch,
    outputs: Object.values(spec.artifacts ?? {}),
    hidden: hiddenFromAgents(config),
    container: containerName(config.stateDir, job.id),
    store: config.stateDir,
  };
  try {
    if (!sharesNoFiles(sandbox)) return wrapInSandbox(run);
    const command = wrapForRemoteEngine(run);
    await command.prepare?.(Date.now() + job.timeoutS * 1000);
    return command;
  } catch (error) {
    if (!(error instanceof SandboxError)) throw error;
    const advice = error.missingCli ? `. ${capitalize(backend.installHint)}, or set ${backend.binEnv} to its path` : '';
    return {
      state: error.timedOut ? 'timed_out' : 'failed',
      outcome: failed(`could not start ${spec.file} in sandbox ${sandbox.mode}: ${error.message}${advice}`),
    };
  }
}

/**
 * Runs the command in its own process group. A max_turns the CLI does not enforce itself: its
 * live output is followed, and the run stopped (its whole group, as a cancel does) as a turn
 * past it begins (`hit`).
 */
async function runFollowingBudget(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  spec: CommandSpec,
  command: WrappedCommand,
  { config, env }: ExecutorContext,
  control: Parameters<Executor>[1],
  logs: RunLogs,
): Promise<{ run: RunResult; hit: BudgetHit | undefined }> {
  const overBudget = new AbortController();
  let hit: BudgetHit | undefined;
  const maxTurns = backend.budgetFlags?.includes('turns') ? undefined : job.maxTurns;
  const meter = backend.liveTurn && maxTurns !== undefined ? turnMeter(backend, maxTurns) : undefined;
  const running = runProcess({
    file: command.file,
    args: command.args,
    stop: command.stop,
    passFds: command.fds,
    baseEnv: env,
    env: spec.env,
    cwd: job.cwd,
    stdin: spec.stdin,
    stdinFile: control.promptFile?.text === spec.stdin ? control.promptFile.path : undefined,
    stdoutLog: logs.stdout,
    stderrLog: logs.stderr,
    timeoutMs: job.timeoutS * 1000,
    graceMs: config.killGraceMs,
    signal: meter ? AbortSignal.any([control.signal, overBudget.signal]) : control.signal,
  });
  const watch =
    meter &&
    followLines(
      logs.stdout,
      (line) => {
        if (hit) return;
        hit = meter.add(jsonLines(line).records[0] ?? {});
        if (hit) overBudget.abort();
      },
      BUDGET_WATCH_MS,
    );
  control.onOutputTail(running.tail);
  if (running.pid !== undefined) control.onProcessGroup?.({ pgid: running.pid, mark: running.mark });
  const run = await running.done;
  await watch?.stop();
  return { run, hit };
}

/** How the run ended, as the job's final state and outcome (the backend's parse of its output). */
function cliResult(
  backend: CliBackend,
  job: Readonly<JobRecord>,
  spec: CommandSpec,
  command: Pick<WrappedCommand, 'explainFailure'>,
  run: RunResult,
  hit: BudgetHit | undefined,
  signal: AbortSignal,
  logs: RunLogs,
): ExecutionResult {
  if (run.end === 'spawn_error') {
    // E2BIG: the CLI is there, its command line (or environment) is what the system refused.
    const advice =
      run.spawnErrorCode === 'E2BIG'
        ? `its command line is too large for the operating system (Linux takes at most 128 KiB in one argument): shorten system_prompt or output_schema, or the agent's MCP servers`
        : `${capitalize(backend.installHint)}, or set ${backend.binEnv} to its path`;
    return {
      state: 'failed',
      outcome: failed(`could not start ${spec.file}: ${run.spawnError}. ${capitalize(advice)}`),
    };
  }
  const artifacts: CliResult['artifacts'] = {};
  for (const [name, path] of Object.entries(spec.artifacts ?? {})) artifacts[name] = readIfPresent(path);
  const outcome = backend.parse({ ...run, artifacts });

  if (run.end === 'timeout') {
    return {
      state: 'timed_out',
      exitCode: run.exitCode,
      outcome: {
        ...outcome,
        ok: false,
        error: `timed out after ${job.timeoutS} s and was stopped; raise timeout_s if it needs longer (log: ${logs.stdout})`,
      },
    };
  }
  if (run.end === 'cancelled' && hit && !signal.aborted) {
    return {
      state: 'failed',
      exitCode: run.exitCode,
      outcome: { ...outcome, ok: false, error: `${hit.error} (log: ${logs.stdout})`, budgetExceeded: hit.kind },
    };
  }
  if (run.end === 'cancelled') {
    return { state: 'cancelled', exitCode: run.exitCode, outcome: { ...outcome, ok: false, error: 'cancelled' } };
  }
  // A container that could not run the CLI, or was killed under it: the engine's cause, not the CLI's parse.
  if (!outcome.ok)
    outcome.error = `${command.explainFailure?.(run) ?? outcome.error ?? 'failed'} (log: ${logs.stdout})`;
  return { state: outcome.ok ? 'succeeded' : 'failed', exitCode: run.exitCode, outcome };
}

/**
 * What a sandboxed agent must not see, wherever its folders hold them: the run store (the shared
 * server's token and daemon file, every run and worktree), the agents' definitions and team
 * presets (their MCP servers may hold tokens), the key files and the user's config folder.
 */
function hiddenFromAgents(config: ExecutorContext['config']): string[] {
  return [config.stateDir, config.agentsDir, presetsDir(config.agentsDir), config.userConfigDir, ...keyFiles(config)];
}

/** A CLI's artifact (its last message) past this is not read. */
const MAX_ARTIFACT_BYTES = 64 * 1024 * 1024;

/** How often a followed budget reads the run's new output. */
const BUDGET_WATCH_MS = 200;

/** A file the CLI wrote (its answer): never through a link nor from a FIFO it left there instead (the server can read what the agent cannot). */
function readIfPresent(path: string): string | undefined {
  const text = readRegularFile(path, MAX_ARTIFACT_BYTES);
  return typeof text === 'string' ? text : undefined;
}

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** How long an answer of unwritableBecause about the runs folder holds: it is asked for every job of a burst. */
const WRITABLE_CHECK_MS = 1000;
const writableChecks = new Map<string, { at: number; problem: string | undefined }>();

/** unwritableBecause(dir), asked again at most once a second (a run's folder is made in it, by this process, 0700). */
function recentlyUnwritable(dir: string): string | undefined {
  const now = Date.now();
  const last = writableChecks.get(dir);
  if (last && now - last.at < WRITABLE_CHECK_MS) return last.problem;
  const problem = unwritableBecause(dir);
  writableChecks.set(dir, { at: now, problem });
  return problem;
}

/**
 * The run's folder, or, when the run store's folder cannot be written (read-only, no
 * permission, a full disk), one in the OS temp folder for the files the CLI is given and
 * writes (its logs, copilot's usage file): the job still runs and its answer is read back.
 */
function scratchDirFor(dir: string, id: string): string {
  try {
    makeDirs(dir);
    if (!recentlyUnwritable(dirname(dir))) return dir;
  } catch {
    // below
  }
  const fallback = join(tmpdir(), `polyspawn-${process.pid}`, id);
  makeDirs(fallback);
  return fallback;
}
