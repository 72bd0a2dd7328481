// `polyspawn run <backend> <prompt|->`: one job from a terminal, through the same app, job table
// and run store as the server (so it shows in IAC.md, `status` and the servers' `list`).
// On a terminal a live line shows the state and elapsed time; piped, the output is plain: the
// answer on stdout, one summary line on stderr. Ctrl-C cancels the job (its whole process
// group, as the server's `cancel` does) and exits 130; a second Ctrl-C kills at once.
import { resolve } from 'node:path';
import { backends as registry } from '../../backends/registry.js';
import type { Backend } from '../../backends/types.js';
import { createApp, type App } from '../app.js';
import type { z } from 'zod';
import { maxBudgetUsdSchema, maxTurnsSchema } from '../jobs/budget.js';
import { ISOLATION_MODES, type Isolation } from '../config/config.js';
import { spawnJob, type SpawnRequest } from '../jobs/spawn.js';
import { isFinished, type JobRecord } from '../jobs/table.js';
import { killAllGroupsNow } from '../jobs/process/runner.js';
import { InputError } from '../lib/errors.js';
import { fullResult } from '../jobs/result.js';
import { duration } from '../../iac/render.js';
import { parseCommandArgs, type CommandIo, type OutStream } from './io.js';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK_MS = 100;

const EXIT_CODES: Record<string, number> = {
  succeeded: 0,
  failed: 1,
  interrupted: 1,
  timed_out: 124,
  cancelled: 130,
};

/** The live line: drawn only on a terminal, cleared before anything else is printed. */
class ProgressLine {
  private timer: NodeJS.Timeout | undefined;
  private frame = 0;
  private shown = false;

  constructor(
    private readonly out: OutStream,
    private readonly text: () => string,
  ) {}

  get enabled(): boolean {
    return this.out.isTTY === true;
  }

  start(): void {
    if (!this.enabled || this.timer) return;
    this.draw();
    this.timer = setInterval(() => this.draw(), TICK_MS);
  }

  draw(): void {
    if (!this.enabled) return;
    const width = Math.max(20, (this.out.columns || 80) - 1);
    const line = `${FRAMES[this.frame++ % FRAMES.length]} ${this.text()}`;
    this.out.write(`\r\x1b[2K${line.length > width ? `${line.slice(0, width - 1)}…` : line}`);
    this.shown = true;
  }

  /** Removes the line (to print something, or at the end). */
  clear(): void {
    if (this.shown) this.out.write('\r\x1b[2K');
    this.shown = false;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.clear();
  }
}

/** "running 12.3 s", "queued 0.4 s": the live line's state and elapsed time. */
function progressText(job: JobRecord, now: number): string {
  const since = Date.parse(job.startedAt ?? job.createdAt);
  return `${job.id} ${job.backend}/${job.model} ${job.state} ${duration(now - since)}`;
}

/** One line for stderr once the job has ended. */
function summaryLine(app: App, job: JobRecord): string {
  const result = fullResult(app, job);
  const parts = [
    `agent ${job.id} (${job.backend}, ${job.model}) ${job.state.replace('_', ' ')} after ${duration(result.elapsed_s * 1000)}`,
  ];
  if (result.usage) parts.push(`${result.usage.input_tokens} in / ${result.usage.output_tokens} out tokens`);
  if (result.cost_usd !== undefined)
    parts.push(
      `$${result.cost_usd.toFixed(result.cost_usd < 0.01 ? 6 : 4)}${result.cost_source === 'estimated' ? ' (estimated)' : ''}`,
    );
  if (result.cost_note) parts.push(`cost unknown: ${job.model} is not in the models table`);
  if (result.premium_requests !== undefined) parts.push(`${result.premium_requests} premium request(s)`);
  if (result.log) parts.push(`log ${result.log}`);
  return parts.join(' · ');
}

export const RUN_USAGE = `Usage: polyspawn run <backend> <prompt...|-> [options]

Runs one agent from the terminal, through the same job table and run store as the server: it
shows in IAC.md and \`polyspawn status\`. The prompt is the remaining arguments joined by spaces,
or "-" to read it from stdin (use \`--\` before a prompt that starts with "-").
The answer goes to stdout; a summary line to stderr. On a terminal a live line shows the state
and elapsed time. Ctrl-C cancels the agent and everything it started.

Options:
  -m, --model <name>       model or alias (default: the backend's default)
      --cwd <dir>          folder inside the project the agent works in (CLI backends; default: the project)
      --timeout <seconds>  stop it after this long (default: the configured timeout_s)
      --system-prompt <t>  extra system instructions
      --resume <id>        continue an earlier agent (its agent id or session id)
      --max-turns <n>      stop it past this many model requests (docs/agents.md, "Budgets")
      --max-budget-usd <x> stop it past this many US dollars (docs/agents.md, "Budgets")
      --isolation <mode>   worktree: work in a git worktree of its own, on branch polyspawn/<id>
                           (CLI backends; default: the configured isolation, none)
      --base <ref>         the commit or ref that worktree starts from (default: HEAD)
      --json               print the whole result as JSON on stdout instead
  -h, --help

Exit code: 0 succeeded, 1 failed, 124 timed out, 130 cancelled, 2 wrong usage.
`;

/** A budget flag's value, checked as the spawn tools check it. */
function budgetFlag(flag: string, raw: string | undefined, schema: z.ZodNumber, takes: string): number | undefined {
  if (raw === undefined) return undefined;
  const parsed = schema.safeParse(Number(raw));
  if (raw.trim() === '' || !parsed.success)
    throw new InputError(`${flag} takes ${takes} ${schema.maxValue}, not "${raw}"`);
  return parsed.data;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

export async function runCommand(argv: string[], io: CommandIo): Promise<number> {
  const args = await runArguments(argv, io);
  if (args === 'help') return (void io.stdout.write(RUN_USAGE), 0);
  let progress: ProgressLine | undefined;
  const log = (message: string): boolean => {
    // The store's closing tally is for server logs, not for someone at a terminal.
    if (/^IAC\.md: \d+ writes for/.test(message)) return true;
    progress?.clear();
    io.stderr.write(`polyspawn: ${message}\n`);
    return true;
  };
  const app = createApp(io.env, io.cwd, log);
  const backend = enabledBackend(app, args.name);
  const job = spawnJob(app, { backend, label: backend.name, ...args.request });
  // After the checks: a mistaken command line leaves the run store alone.
  app.iac.start();

  progress = new ProgressLine(io.stdout, () => progressText(job, Date.now()));
  progress.start();
  try {
    await untilFinished(app, job, log);
  } finally {
    progress.stop();
  }
  killAllGroupsNow(); // nothing should be left; this is the guarantee

  printOutcome(app, job, io, args.json);
  await app.iac.closeBeforeExit();
  return EXIT_CODES[job.state] ?? 1;
}

/** The command line checked: the backend's name, what the job is asked, and --json; or "help". */
async function runArguments(
  argv: string[],
  io: CommandIo,
): Promise<'help' | { name: string; request: Omit<SpawnRequest, 'backend' | 'label'>; json: boolean }> {
  const { values, positionals } = parseCommandArgs(argv, {
    model: { type: 'string', short: 'm' },
    cwd: { type: 'string' },
    timeout: { type: 'string' },
    'system-prompt': { type: 'string' },
    resume: { type: 'string' },
    'max-turns': { type: 'string' },
    'max-budget-usd': { type: 'string' },
    isolation: { type: 'string' },
    base: { type: 'string' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return 'help';
  const [name, ...words] = positionals;
  if (!name) {
    const names = registry.map((b) => b.name);
    throw new InputError(
      `name a backend (${names.join(', ')}), e.g. \`polyspawn run ${names[0]} "explain src/app.ts"\` (\`polyspawn doctor\` says which work here)`,
    );
  }
  if (words.length === 0) throw new InputError(`give ${name} a prompt: as arguments, or "-" to read it from stdin`);
  const prompt = words.length === 1 && words[0] === '-' ? await readAll(io.stdin) : words.join(' ');
  if (prompt.trim() === '') throw new InputError('the prompt is empty: say what the agent should do');
  const timeoutS = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutS !== undefined && !(Number.isInteger(timeoutS) && timeoutS >= 1))
    throw new InputError(`--timeout takes whole seconds, not "${values.timeout}"`);
  const isolation = values.isolation;
  if (isolation !== undefined && !(ISOLATION_MODES as readonly string[]).includes(isolation))
    throw new InputError(`--isolation takes ${ISOLATION_MODES.join(' or ')}, not "${isolation}"`);

  const maxTurns = budgetFlag('--max-turns', values['max-turns'], maxTurnsSchema(), 'a whole number from 1 to');
  const maxBudgetUsd = budgetFlag(
    '--max-budget-usd',
    values['max-budget-usd'],
    maxBudgetUsdSchema(),
    'an amount above 0, at most',
  );
  return {
    name,
    json: values.json === true,
    request: {
      prompt,
      model: values.model,
      cwd: values.cwd === undefined ? undefined : resolve(io.cwd, values.cwd),
      systemPrompt: values['system-prompt'],
      resume: values.resume,
      timeoutS,
      maxTurns,
      maxBudgetUsd,
      isolation: isolation as Isolation | undefined,
      base: values.base,
    },
  };
}

/** The backend named, if this configuration enables it; else an error that lists the ones it does. */
function enabledBackend(app: App, name: string): Backend {
  const backend = app.backends.find((b) => b.name === name);
  if (backend) return backend;
  const disabled = app.config.backends[name]
    ? ` (${name} is disabled in the config or by POLYSPAWN_${name.toUpperCase()}_ENABLED)`
    : '';
  throw new InputError(`no backend "${name}"${disabled}: use one of ${app.backends.map((b) => b.name).join(', ')}`);
}

/**
 * Waits for the job to end. Ctrl-C (and SIGTERM, SIGHUP): cancel the job, which ends its process
 * group; then the normal path reports it. A second one kills everything at once.
 */
async function untilFinished(app: App, job: JobRecord, log: (message: string) => boolean): Promise<void> {
  let cancelling = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (cancelling) {
      killAllGroupsNow();
      log(`${signal} again: killed agent ${job.id}`);
      process.exit(130);
    }
    cancelling = true;
    log(`${signal}: cancelling agent ${job.id} (again to kill it at once)`);
    void app.jobs.cancel(job.id);
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const s of signals) process.on(s, onSignal);
  try {
    while (!isFinished(job.state)) await app.jobs.waitFor([job.id], { timeoutMs: 3_600_000, mode: 'all' });
  } finally {
    for (const s of signals) process.off(s, onSignal);
  }
}

/** The ended job: its whole result as JSON, or its answer on stdout and a summary on stderr. */
function printOutcome(app: App, job: JobRecord, io: CommandIo, json: boolean): void {
  const result = fullResult(app, job);
  if (json) return void io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  if (job.state === 'succeeded' && result.text)
    io.stdout.write(result.text.endsWith('\n') ? result.text : `${result.text}\n`);
  if (job.state !== 'succeeded' && job.state !== 'cancelled' && result.error)
    io.stderr.write(`polyspawn: ${result.error}\n`);
  io.stderr.write(`polyspawn: ${summaryLine(app, job)}\n`);
  const changes = job.worktree?.changes;
  if (changes && !changes.removed)
    io.stderr.write(`polyspawn: ${job.worktree!.branch}: ${changes.diffStat} (${job.worktree!.path})\n`);
}
