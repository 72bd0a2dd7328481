// `polyspawn doctor`: is each backend usable here, and if not, why; where IAC.md and the run
// store are; which config files are in effect. It is the one place that starts the vendor
// CLIs outside a job (`<cli> --version` and the backend's sign-in check, each with a short
// time-out). Key values are never shown: only the name a key was found under, and where.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { sep } from 'node:path';
import { backends as registry } from '../../backends/registry.js';
import type { Backend, CliBackend } from '../../backends/types.js';
import { agentProblems, type AgentProblem } from '../jobs/agents/definitions.js';
import { loadPresets, presetsDir, type PresetProblem } from '../jobs/teams/presets.js';
import { checkBackend } from '../config/availability.js';
import { loadConfig, projectConfigNote, type Config, type ProjectConfig } from '../config/config.js';
import { findApiKey, keyFiles } from '../config/keys.js';
import { checkDefaultModels, loadModels, modelsOverrideFiles, type ModelsTable } from '../config/models.js';
import { iacTarget } from '../../iac/writer.js';
import { VERSION } from '../lib/version.js';
import { CONTAINER_MODES, type SandboxMode, type SandboxSettings } from '../config/sandbox.js';
import {
  BWRAP_INSTALL,
  BWRAP_PROBE,
  containerFailure,
  ENGINE_INSTALL,
  engineArgs,
  imageProbeArgs,
} from '../jobs/process/sandbox.js';
import which from 'which';
import { InputError } from '../lib/errors.js';
import { RunStore } from '../../iac/store.js';
import { selfIdentity } from '../lib/proc.js';
import { Redactor } from '../lib/redact.js';
import { keptWorktrees, worktreeLines, type KeptWorktree } from './status.js';
import { cell, parseCommandArgs, reportFailure, textTable, type CommandIo } from './io.js';

const VERSION_TIMEOUT_MS = 5000;

type SignInCheck = { state: 'signed in' | 'not signed in' | 'not checked'; detail: string };

type VersionCheck = { ok: true; version: string } | { ok: false; timedOut: boolean; problem: string };

type BackendCheck = {
  name: string;
  kind: 'cli' | 'api';
  enabled: boolean;
  usable: boolean;
  model?: string;
  /** CLI: the executable found, and what its --version said. */
  path?: string;
  version?: VersionCheck;
  /** CLI: whether it is signed in, as its own status command says (when it answered --version). */
  signIn?: SignInCheck;
  /** API: the name the key was found under and where (never its value); the endpoint. */
  keySource?: string;
  baseUrl?: string;
  /** One sentence: what is there, or how to fix what is not. */
  detail: string;
};

type DoctorReport = {
  version: string;
  node: string;
  projectDir: string;
  /** Where IAC.md is written, and why not where configured (a file polyspawn did not write is there). */
  iacFile: string;
  iacProblem?: string;
  iacExists: boolean;
  stateDir: string;
  runs: number;
  /** Damaged lines the store's index files hold, skipped: "index.jsonl: N damaged lines skipped (lines …)". */
  storeDamage: string[];
  configFiles: string[];
  /** What the project's own config set, and what it may not set and was ignored. */
  projectConfig?: ProjectConfig;
  /** The models.json overrides applied over the backends' shipped table, in order. */
  modelsFiles: string[];
  keyFiles: { path: string; exists: boolean }[];
  concurrency: number;
  timeoutS: number;
  backends: BackendCheck[];
  usable: number;
  /** Agent definition files (agents/<name>/agent.md) that are skipped, and why. */
  agentProblems: AgentProblem[];
  /** Team presets (teams/<name>.md): the usable ones' names, and the files that fail the checks. */
  teamPresets: string[];
  presetProblems: PresetProblem[];
  /** Where CLI agents work unless told (config `isolation`), and the worktrees left in the project. */
  isolation: Config['isolation'];
  worktrees: KeptWorktree[];
  /** Whether each sandbox can run here, and which backends the config puts in one. */
  sandboxes: SandboxCheck[];
};

type SandboxCheck = {
  mode: Exclude<SandboxMode, 'none'>;
  ok: boolean;
  /** One sentence: that it works, or why not and how to fix it. */
  detail: string;
  /** The CLI backends the user's config runs in it. */
  backends: string[];
};

/** A sandbox started for nothing but `echo`: bubblewrap gets a second at most. */
const BWRAP_PROBE_MS = 1000;
/** Whether a container engine answers: a client without a daemon may wait that long to say so. */
const ENGINE_PROBE_MS = 3000;
/** The CLI's `--version` in its image: a container's start on a busy engine takes seconds. */
const IMAGE_PROBE_MS = 30_000;

/** What a probe of a CLI or a sandbox answered: its exit, the start of its output, or a time-out. */
type ProbeAnswer = {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** Set when it could not start at all. */
  error?: string;
};

/**
 * Runs `<file> <args>` in its own process group, stdin closed, without the variables named in
 * `removeEnv` (as a job would run it); kills the group on time-out.
 */
function probe(
  file: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  removeEnv: readonly string[] = [],
): Promise<ProbeAnswer> {
  return new Promise((resolve) => {
    const childEnv = { ...env };
    for (const name of removeEnv) delete childEnv[name];
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const child = spawn(file, args, { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const keep = (s: string, chunk: Buffer) => (s.length < 4096 ? s + chunk.toString() : s);
    child.stdout.on('data', (c: Buffer) => (stdout = keep(stdout, c)));
    child.stderr.on('data', (c: Buffer) => (stderr = keep(stderr, c)));
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve({ exitCode: null, signal: null, stdout, stderr, timedOut: false, error: error.message });
    });
    child.once('close', (exitCode, signal) => {
      clearTimeout(timer);
      resolve({ exitCode, signal, stdout, stderr, timedOut });
    });
  });
}

const firstLine = (s: string) =>
  s
    .split('\n')
    .map((l) => l.trim())
    .find(Boolean) ?? '';

/**
 * Runs `<file> --version` (or `check`'s arguments); it answered when it exited 0 and printed a line.
 */
async function checkVersion(
  file: string,
  env: NodeJS.ProcessEnv,
  timeoutMs = VERSION_TIMEOUT_MS,
  removeEnv: readonly string[] = [],
  check: { args: string[]; label: string } = { args: ['--version'], label: '--version' },
): Promise<VersionCheck> {
  const answer = await probe(file, check.args, env, timeoutMs, removeEnv);
  if (answer.error !== undefined) return { ok: false, timedOut: false, problem: answer.error };
  if (answer.timedOut)
    return { ok: false, timedOut: true, problem: `no answer to ${check.label} within ${timeoutMs / 1000} s` };
  if (answer.exitCode === 0 && firstLine(answer.stdout))
    return { ok: true, version: cell(firstLine(answer.stdout), 60) };
  const why = answer.signal ? `ended by ${answer.signal}` : `exited with code ${answer.exitCode}`;
  const said = firstLine(answer.stderr);
  return { ok: false, timedOut: false, problem: `${check.label} ${why}${said ? `: ${cell(said, 120)}` : ''}` };
}

/**
 * Whether the CLI is signed in, by its own status command (the backend's `signInCheck`), which
 * sends no model request: signed in (how), not (what to do), or not checked (why).
 */
async function checkSignIn(
  backend: CliBackend,
  file: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<SignInCheck> {
  const check = backend.signInCheck;
  if (!check) return { state: 'not checked', detail: `${backend.name} cannot tell without sending a request` };
  const command = `\`${backend.executable} ${check.args.join(' ')}\``;
  const answer = await probe(file, check.args, env, timeoutMs, backend.removeEnv);
  const verdict = answer.error || answer.timedOut ? undefined : check.read(answer, env);
  if (!verdict)
    return {
      state: 'not checked',
      detail: answer.timedOut
        ? `${command} gave no answer within ${timeoutMs / 1000} s`
        : `${command} said nothing it reads`,
    };
  return verdict.signedIn
    ? { state: 'signed in', detail: `signed in${verdict.how ? ` (${verdict.how})` : ''}` }
    : { state: 'not signed in', detail: verdict.fix };
}

async function checkOne(
  backend: Backend,
  config: Config,
  models: ModelsTable | undefined,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<BackendCheck> {
  const settings = config.backends[backend.name]!;
  const base = {
    name: backend.name,
    kind: backend.kind,
    enabled: settings.enabled,
    model: models?.[backend.name]?.default || undefined,
  };
  const upper = backend.name.toUpperCase();
  if (!settings.enabled) {
    return {
      ...base,
      usable: false,
      detail: `disabled (POLYSPAWN_${upper}_ENABLED or backends.${backend.name}.enabled in the config)`,
    };
  }
  if (backend.kind === 'api') {
    const baseUrl = settings.baseUrl ?? backend.defaultBaseUrl;
    const key = findApiKey(backend, config, env);
    if (!key.found) {
      // The key files are listed below the table: the sentence here says only what to set.
      return { ...base, usable: false, baseUrl, detail: key.summary };
    }
    const urlNote = `; base URL ${baseUrl}${settings.baseUrl ? '' : ' (default)'}`;
    return {
      ...base,
      usable: true,
      keySource: key.source,
      baseUrl,
      detail: `key ${key.source.startsWith('env ') ? `from env ${key.name}` : key.source}${urlNote}`,
    };
  }
  if (settings.sandbox.image && CONTAINER_MODES.includes(settings.sandbox.mode))
    return { ...base, ...(await checkImage(backend, settings.sandbox, env)) };
  const availability = checkBackend(backend, settings, env, config);
  if (!availability.usable) return { ...base, usable: false, detail: availability.detail };
  const path = availability.detail;
  const version = await checkVersion(path, env, timeoutMs, backend.removeEnv);
  if (version.ok) {
    const signIn = await checkSignIn(backend, path, env, timeoutMs);
    const installed = `${path}, ${version.version}`;
    return {
      ...base,
      usable: signIn.state !== 'not signed in',
      path,
      version,
      signIn,
      detail:
        signIn.state === 'not checked'
          ? `${installed}; sign-in not checked: ${signIn.detail}`
          : `${installed}; ${signIn.detail}`,
    };
  }
  if (version.timedOut)
    return {
      ...base,
      usable: true,
      path,
      version,
      signIn: { state: 'not checked', detail: version.problem },
      detail: `${path}; ${version.problem} (a first run may still be unpacking: try again)`,
    };
  return {
    ...base,
    usable: false,
    path,
    version,
    detail: `${path} is there but broken (${version.problem}): reinstall it${backend.kind === 'cli' ? ` (${backend.installHint})` : ''}, or set ${backend.binEnv} to a working one`,
  };
}

/**
 * A backend whose agents run only in a container: its image on the engine, and the CLI in it
 * (its `--version`, run there without network). Sign-in is not checked: the login folder is
 * the host's, the CLI the image's.
 */
async function checkImage(
  backend: CliBackend,
  sandbox: SandboxSettings,
  env: NodeJS.ProcessEnv,
): Promise<Pick<BackendCheck, 'usable' | 'detail' | 'version'>> {
  const { mode, image } = sandbox as SandboxSettings & { image: string };
  const where = `in the ${mode} image ${image}`;
  const engine = which.sync(mode, { path: env.PATH, nothrow: true });
  if (!engine) return { usable: false, detail: `runs ${where}, but ${mode} is not on PATH: ${ENGINE_INSTALL[mode]}` };
  const answer = await probe(
    engine,
    [...engineArgs(mode, sandbox.engine), ...imageProbeArgs(image, backend.executable)],
    env,
    IMAGE_PROBE_MS,
  );
  if (answer.error !== undefined || answer.timedOut)
    return {
      usable: false,
      detail: `runs ${where}, but ${answer.error ?? `${mode} gave no answer within ${IMAGE_PROBE_MS / 1000} s`}`,
    };
  if (answer.exitCode === 0 && firstLine(answer.stdout)) {
    const version = cell(firstLine(answer.stdout), 60);
    return {
      usable: true,
      version: { ok: true, version },
      detail: `\`${backend.executable}\` ${where}, ${version}; sign-in not checked (the CLI is the image's)`,
    };
  }
  const why =
    containerFailure(mode, image, backend.executable, answer.exitCode, answer.stderr) ??
    `\`${backend.executable} --version\` ${where} exited with code ${answer.exitCode}: ${cell(firstLine(answer.stderr), 120)}`;
  return { usable: false, detail: `runs ${where}, but ${why}` };
}

export async function collectDoctor(
  env: NodeJS.ProcessEnv,
  cwd: string,
  options: {
    versionTimeoutMs?: number;
    /** Every backend polyspawn offers (default: the registry). */ backends?: readonly Backend[];
  } = {},
): Promise<DoctorReport> {
  const config = loadConfig(options.backends ?? registry, env, cwd);
  // The ACP agents the user's config declares are checked as the built-in backends are.
  const allBackends = [...(options.backends ?? registry), ...config.acpAgents];
  const modelsFiles = modelsOverrideFiles(config.projectDir, config.userConfigDir, env);
  const models = loadModels(allBackends, modelsFiles);
  // The server would refuse to start without them: said as the configuration error it is.
  checkDefaultModels(
    models,
    allBackends.filter((b) => config.backends[b.name]!.enabled),
  );
  const backends = await Promise.all(
    allBackends.map((b) => checkOne(b, config, models, env, options.versionTimeoutMs ?? VERSION_TIMEOUT_MS)),
  );
  const iac = iacTarget(config.iacFile);
  const presets = loadPresets(presetsDir(config.agentsDir));
  // It only reads: nothing is written through this store.
  const store = new RunStore({ stateDir: config.stateDir, redactor: new Redactor(), identity: selfIdentity() });
  let runs = 0;
  try {
    runs = readdirSync(`${config.stateDir}${sep}runs`).length;
  } catch {
    // no store yet
  }
  return {
    version: VERSION,
    node: process.version,
    projectDir: config.projectDir,
    iacFile: iac.file,
    iacProblem: iac.problem || undefined,
    iacExists: existsSync(iac.file),
    stateDir: config.stateDir,
    runs,
    storeDamage: store.damage(),
    configFiles: config.files,
    projectConfig: config.projectConfig,
    modelsFiles,
    keyFiles: keyFiles(config).map((path) => ({ path, exists: existsSync(path) })),
    concurrency: config.concurrency,
    timeoutS: config.timeoutS,
    backends,
    usable: backends.filter((b) => b.usable).length,
    agentProblems: agentProblems({ config, models, backends: allBackends }),
    teamPresets: presets.presets.map((p) => p.name),
    presetProblems: presets.problems,
    isolation: config.isolation,
    worktrees: keptWorktrees(store),
    sandboxes: await checkSandboxes(config, env),
  };
}

/** A run of each sandbox that does nothing: bwrap with new namespaces, each engine's `version`. */
async function checkSandboxes(config: Config, env: NodeJS.ProcessEnv): Promise<SandboxCheck[]> {
  const modes = ['bwrap', 'docker', 'podman'] as const;
  return Promise.all(
    modes.map(async (mode): Promise<SandboxCheck> => {
      const backends = Object.entries(config.backends)
        .filter(([, s]) => s.enabled && s.sandbox.mode === mode)
        .map(([name]) => name);
      const file = which.sync(mode, { path: env.PATH, nothrow: true });
      const install = mode === 'bwrap' ? BWRAP_INSTALL : ENGINE_INSTALL[mode];
      if (!file) return { mode, ok: false, detail: `not on PATH: ${install}`, backends };
      const check =
        mode === 'bwrap'
          ? { args: [...BWRAP_PROBE, 'echo', 'sandboxed'], label: 'a bwrap probe' }
          : { args: ['version', '--format', '{{.Server.Version}}'], label: `${mode} version` };
      const timeoutMs = mode === 'bwrap' ? BWRAP_PROBE_MS : ENGINE_PROBE_MS;
      const checked = await checkVersion(file, env, timeoutMs, [], check);
      if (checked.ok)
        return {
          mode,
          ok: true,
          detail: `${file} works${mode === 'bwrap' ? '' : ` (engine ${checked.version})`}`,
          backends,
        };
      return {
        mode,
        ok: false,
        detail: `${file} is there, but ${mode === 'bwrap' ? 'cannot make a sandbox' : 'no engine answers'} (${checked.problem})`,
        backends,
      };
    }),
  );
}

const home = (path: string) => {
  const h = homedir();
  return path.startsWith(h + sep) ? `~${path.slice(h.length)}` : path;
};

/** ok: it can run; installed: a CLI that answered, whose sign-in is not known; else why not. */
function backendStatus(b: BackendCheck): string {
  if (!b.enabled) return 'disabled';
  if (b.signIn?.state === 'not signed in') return 'NOT SIGNED IN';
  if (!b.usable) return 'NOT USABLE';
  return b.signIn?.state === 'not checked' ? 'installed' : 'ok';
}

export function formatDoctor(r: DoctorReport): string {
  const projectNote = r.projectConfig && projectConfigNote(r.projectConfig);
  const rows = r.backends.map((b) => [b.name, b.kind, backendStatus(b), b.model ?? '—', b.detail]);
  const out = [
    `polyspawn ${r.version} (node ${r.node})`,
    '',
    textTable(['backend', 'kind', 'status', 'model', 'details'], rows),
    '',
    `project     ${r.projectDir}`,
    `IAC.md      ${r.iacFile}${r.iacExists ? '' : ' (not written yet: it appears with the first agent)'}`,
    ...(r.iacProblem ? [`            ${r.iacProblem}`] : []),
    `run store   ${r.stateDir} (${r.runs} run${r.runs === 1 ? '' : 's'})`,
    ...r.storeDamage.map((d) => `            ${d}`),
    `config      ${r.configFiles.length ? r.configFiles.map(home).join(', ') : 'none: defaults (and POLYSPAWN_* variables)'}`,
    ...(projectNote ? [`project cfg ${projectNote}`] : []),
    `models      ${['shipped table', ...r.modelsFiles.map(home)].join(', then ')}`,
    `API keys    ${r.keyFiles.map((k) => `${home(k.path)} (${k.exists ? 'found' : 'none'})`).join(', then ')}, then environment variables`,
    `limits      ${r.concurrency} agents at once, ${r.timeoutS} s time-out each`,
    `isolation   ${r.isolation}${r.worktrees.length ? `; ${r.worktrees.length} worktree${r.worktrees.length === 1 ? '' : 's'} kept (integrate or discard each):` : ''}`,
    ...worktreeLines(r.worktrees).map((line) => `            ${line}`),
    ...r.sandboxes.map((s) => {
      // Unusable matters where the config runs a backend in it.
      const status = s.ok ? 'ok' : s.backends.length ? 'NOT USABLE' : 'not available';
      const used = s.backends.length ? ` (configured for ${s.backends.join(', ')})` : '';
      return `sandbox     ${s.mode} ${status}${used}: ${s.detail}`;
    }),
    '',
  ];
  if (r.usable === 0) {
    out.push(
      'No backend is usable: install one of the CLIs or set an API key (see the details above), then run `polyspawn doctor` again.',
    );
  } else {
    out.push(`${r.usable} of ${r.backends.length} backends usable.`);
  }
  for (const p of r.agentProblems) out.push(`agent file skipped: ${home(p.file)}: ${p.problem}`);
  if (r.teamPresets.length) out.push(`team presets: ${r.teamPresets.join(', ')}`);
  for (const p of r.presetProblems) out.push(`team preset refused: ${home(p.file)}: ${p.problem}`);
  return `${out.join('\n')}\n`;
}

export const DOCTOR_USAGE = `Usage: polyspawn doctor [--json]

Checks every backend: for a CLI, whether it is found, answers --version and is signed in (asked
with the CLI's own status command, which sends no request; "installed" where the CLI cannot
tell); for an API, whether a key is found (its name and file, never its value) and which base
URL is used. Shows where
IAC.md and the run store are and which config files are in effect. Settings come from the
current folder's project (POLYSPAWN_PROJECT_DIR to choose another) and the environment, as the
server reads them: run it with the environment your MCP client gives the server.
Exit code 0 when at least one backend is usable, 1 when none is (or the config is broken).
`;

export async function doctorCommand(argv: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, {
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return (void io.stdout.write(DOCTOR_USAGE), 0);
  if (positionals.length) throw new InputError(`doctor takes no arguments (got ${positionals.join(' ')})`);
  let report: DoctorReport;
  try {
    report = await collectDoctor(io.env, io.cwd);
  } catch (error) {
    return reportFailure(io, 'doctor', error);
  }
  io.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : formatDoctor(report));
  return report.usable > 0 ? 0 : 1;
}
