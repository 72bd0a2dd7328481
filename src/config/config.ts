// Settings: defaults, then the user's config file, then the project's, then environment
// variables (what an MCP client's `env` block sets). Defaults work with no file at all.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import type { Backend, BackendSettings } from '../../backends/types.js';
import { ConfigError } from '../lib/errors.js';
import { isInside } from '../lib/fs.js';
import { processLaunch } from '../lib/proc.js';
import { projectDaemon, type DaemonState } from '../lib/daemon-file.js';
import { ENV_NAME } from '../lib/text.js';
import { acpAgentsSchema, acpBackends } from './acp-agents.js';
import { looserThan, type AcpBackend } from '../../backends/acp.js';
import { SANDBOX_MODES, sandboxSchema, sandboxSettings, type SandboxMode, type SandboxSettings } from './sandbox.js';

export type Config = {
  projectDir: string;
  stateDir: string;
  /** IAC.md: where, and how many finished interactions it shows. */
  iacFile: string;
  iacEntries: number;
  concurrency: number;
  timeoutS: number;
  killGraceMs: number;
  backends: Record<
    string,
    BackendSettings & { enabled: boolean; baseUrl?: string; env: string[]; sandbox: SandboxSettings }
  >;
  /** The config and models files that were read, for `doctor` and the logs. */
  files: string[];
  userConfigDir: string;
  /** The project's agent definitions (<name>/agent.md): .polyspawn/agents unless configured. */
  agentsDir: string;
  /** Whether running CLI agents get a channel to ask the orchestrator (ask_parent). */
  channel: boolean;
  /** Whether a job's cwd may lie outside the project folder (only the user's config or the environment says so). */
  allowCwdOutsideProject: boolean;
  /** Whether CLI jobs run in a git worktree of their own unless a spawn or an agent says (default none). */
  isolation: Isolation;
  /** Whether a spawn call may choose its sandbox (only the user's config or the environment says so). */
  allowCallerSandbox: boolean;
  /** How many agents one team may start in all, the teams below it included (only the user's config or the environment). */
  teamMaxAgents: number;
  /** What the project's own polyspawn.config.json set, and what it may not set and was ignored. */
  projectConfig?: ProjectConfig;
  /** The ACP agents the user's config declares (`acp_agents`), as backends after the built-in ones. */
  acpAgents: AcpBackend[];
};

/** A project's file, as trusted as the repository it came with: said at start and by `doctor`. */
export type ProjectConfig = {
  file: string;
  /** `key value` for each setting it made. */
  changed: string[];
  /** The settings only the user's own config or the environment may make (`backends.grok.base_url`). */
  ignored: string[];
  /** The user's own config file, where those belong. */
  userFile: string;
};

/**
 * What runs (a CLI's executable), where keys are sent (an API's endpoint) and which secrets a
 * CLI gets (`env`): a cloned repository's config could point them anywhere, so only the user's
 * own config or the environment sets them.
 */
const USER_ONLY_BACKEND_KEYS = ['bin', 'base_url', 'env', 'sandbox'] as const;
/**
 * Where agents may work and in what sandbox (src/config/sandbox.ts): a repository must not widen it
 * for itself; nor declare an ACP agent, a program to run (`acp_agents`, src/config/acp-agents.ts).
 */
const USER_ONLY_KEYS = ['allow_cwd_outside_project', 'allow_caller_sandbox', 'team_max_agents', 'acp_agents'] as const;
/** The paths a config sets, each with the variable that overrides it. */
const PATH_KEYS = {
  state_dir: 'POLYSPAWN_STATE_DIR',
  iac_file: 'POLYSPAWN_IAC_FILE',
  agents_dir: 'POLYSPAWN_AGENTS_DIR',
} as const;

const toolList = z.array(z.string().min(1)).max(200);
const backendFileSchema = z
  .object({
    enabled: z.boolean(),
    permission: z.string(),
    allow_tools: toolList,
    deny_tools: toolList,
    bin: z.string().min(1),
    /** API backends: the vendor endpoint (a gateway, a proxy, the tests' fake server). */
    base_url: z.string().min(1),
    /** CLI backends: variables passed on by name, secrets included (a CLI gets no other secret). */
    env: z.array(z.string().regex(ENV_NAME, 'must be a variable name')).max(100),
    /** CLI backends: the sandbox its agents run in (src/config/sandbox.ts). */
    sandbox: sandboxSchema,
  })
  .partial()
  .strict();

/** Where a CLI job works: the project's folder, or a git worktree of its own (src/jobs/worktree/). */
export const ISOLATION_MODES = ['none', 'worktree'] as const;
export type Isolation = (typeof ISOLATION_MODES)[number];

/** The agents one team (its tree of teams) may start: the default, and the most the config may allow. */
const DEFAULT_TEAM_MAX_AGENTS = 50;
const TEAM_MAX_AGENTS_LIMIT = 1000;

/** The longest a job may run: a week. */
const MAX_TIMEOUT_S = 7 * 86400;
/** A job's time-out in whole seconds, wherever one is given (config, tool, agent definition). */
export const timeoutSeconds = () => z.number().int().min(1).max(MAX_TIMEOUT_S);

const fileSchema = z
  .object({
    concurrency: z.number().int().min(1).max(1000),
    timeout_s: timeoutSeconds(),
    kill_grace_s: z.number().min(0).max(300),
    state_dir: z.string().min(1),
    iac_file: z.string().min(1),
    iac_entries: z.number().int().min(0).max(10_000),
    agents_dir: z.string().min(1),
    channel: z.boolean(),
    allow_cwd_outside_project: z.boolean(),
    isolation: z.enum(ISOLATION_MODES),
    allow_caller_sandbox: z.boolean(),
    team_max_agents: z.number().int().min(1).max(TEAM_MAX_AGENTS_LIMIT),
    backends: z.record(z.string(), backendFileSchema),
    acp_agents: acpAgentsSchema,
  })
  .partial()
  .strict();

type FileConfig = z.infer<typeof fileSchema>;

export function userConfigDir(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_CONFIG_HOME || (process.platform === 'win32' && env.APPDATA) || join(homedir(), '.config');
  return join(base, 'polyspawn');
}

export function readJsonFile(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`${path} is not valid JSON (${(error as Error).message}): fix or remove it`);
  }
}

function readConfigFile(path: string): FileConfig {
  const parsed = fileSchema.safeParse(readJsonFile(path));
  if (!parsed.success) throw new ConfigError(`${path}: ${describeZodError(parsed.error)}`);
  return parsed.data;
}

export function describeZodError(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'value'}: ${i.message}`).join('; ');
}

const envName = (backend: string, key: string) => `POLYSPAWN_${backend.toUpperCase()}_${key}`;

function envNumber(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min || value > max) {
    throw new ConfigError(`${name}=${raw} is not a number from ${min} to ${max}`);
  }
  return value;
}

/** An http(s) URL without a trailing slash, or a ConfigError naming where it came from. */
function baseUrl(raw: string, from: string): string {
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new ConfigError(`${from}: "${raw}" is not an http(s) URL (e.g. https://gateway.example.com/v1)`);
  }
  return raw.replace(/\/+$/, '');
}

/** A yes/no variable: unset or empty is undefined; 0, false, no and off are no; anything else yes. */
function envFlag(env: NodeJS.ProcessEnv, name: string): boolean | undefined {
  const raw = env[name];
  return raw ? !/^(0|false|no|off)$/i.test(raw) : undefined;
}

function isolationFrom(env: NodeJS.ProcessEnv): Isolation | undefined {
  const raw = env.POLYSPAWN_ISOLATION;
  if (!raw) return undefined;
  if (!(ISOLATION_MODES as readonly string[]).includes(raw))
    throw new ConfigError(`POLYSPAWN_ISOLATION=${raw} is not one of ${ISOLATION_MODES.join(', ')}`);
  return raw as Isolation;
}

function envList(env: NodeJS.ProcessEnv, name: string): string[] | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** POLYSPAWN_<NAME>_SANDBOX: a mode, with the configured options (an environment sets no mounts). */
function sandboxMode(env: NodeJS.ProcessEnv, name: string): SandboxMode | undefined {
  const raw = env[name];
  if (!raw) return undefined;
  const mode = SANDBOX_MODES.find((m) => m === raw);
  if (!mode) throw new ConfigError(`${name}=${raw} is not one of ${SANDBOX_MODES.join(', ')}`);
  return mode;
}

/** The user's project: POLYSPAWN_PROJECT_DIR, else the working directory. */
function projectDirFrom(env: NodeJS.ProcessEnv, cwd: string): string {
  return resolve(cwd, env.POLYSPAWN_PROJECT_DIR || '.');
}

/**
 * The project's file without what only the user may set, and what it set: its paths must stay
 * inside the project (links resolved), or a ConfigError says what to change.
 */
function projectLayer(
  layer: FileConfig,
  file: string,
  projectDir: string,
  userFile: string,
): { layer: FileConfig; said: ProjectConfig } {
  for (const [key, variable] of Object.entries(PATH_KEYS)) {
    const value = layer[key as keyof typeof PATH_KEYS];
    if (value !== undefined && !isInside(projectDir, resolve(projectDir, value))) {
      throw new ConfigError(
        `${file}: ${key} "${value}" is outside the project (${projectDir}): a project's config keeps its files inside ` +
          `the project; set a place outside it in your own config (${userFile}) or with ${variable}`,
      );
    }
  }
  const said: ProjectConfig = { file, changed: [], ignored: [], userFile };
  const kept = { ...layer };
  for (const key of USER_ONLY_KEYS) {
    if (kept[key] === undefined) continue;
    said.ignored.push(key);
    delete kept[key];
  }
  const backends: NonNullable<FileConfig['backends']> = {};
  for (const [name, settings] of Object.entries(layer.backends ?? {})) {
    const keptSettings = { ...settings };
    for (const key of USER_ONLY_BACKEND_KEYS) {
      if (keptSettings[key] === undefined) continue;
      said.ignored.push(`backends.${name}.${key}`);
      delete keptSettings[key];
    }
    backends[name] = keptSettings;
  }
  const { backends: _, ...top } = kept;
  for (const [key, value] of Object.entries(top)) said.changed.push(`${key} ${JSON.stringify(value)}`);
  for (const [name, settings] of Object.entries(backends))
    for (const [key, value] of Object.entries(settings))
      said.changed.push(`backends.${name}.${key} ${JSON.stringify(value)}`);
  return { layer: { ...top, ...(layer.backends ? { backends } : {}) }, said };
}

/** For the log and `doctor`: the project's config file, what it changed, and what it may not set. */
export function projectConfigNote(said: ProjectConfig): string | undefined {
  if (said.changed.length === 0 && said.ignored.length === 0) return undefined;
  const parts = [
    ...(said.changed.length ? [`sets ${said.changed.join(', ')}`] : []),
    ...(said.ignored.length
      ? [
          `it may not set ${said.ignored.join(', ')} (ignored: set them in your own config, ${said.userFile}, or the environment)`,
        ]
      : []),
  ];
  return `${said.file} ${parts.join('; ')}`;
}

export function loadConfig(backends: readonly Backend[], env: NodeJS.ProcessEnv, cwd: string): Config {
  const projectDir = projectDirFrom(env, cwd);
  const userDir = userConfigDir(env);
  const { files, merged, projectConfig, userFile, userBackends } = readConfigFiles(env, cwd, projectDir, userDir);
  const acpAgents = acpBackends(merged.acp_agents, new Set(backends.map((b) => b.name)), userFile);
  const everyBackend = [...backends, ...acpAgents];

  const known = new Set(everyBackend.map((b) => b.name));
  if (projectConfig) keepProjectWithinUser(merged, userBackends, projectConfig, known, acpAgents, env);
  for (const name of Object.keys(merged.backends ?? {})) {
    if (!known.has(name)) throw new ConfigError(`backends.${name}: no such backend (known: ${[...known].join(', ')})`);
  }

  const config: Config = {
    projectDir,
    stateDir: resolve(projectDir, env.POLYSPAWN_STATE_DIR || merged.state_dir || '.polyspawn'),
    iacFile: resolve(projectDir, env.POLYSPAWN_IAC_FILE || merged.iac_file || 'IAC.md'),
    iacEntries: Math.floor(envNumber(env, 'POLYSPAWN_IAC_ENTRIES', 0, 10_000) ?? merged.iac_entries ?? 200),
    concurrency: envNumber(env, 'POLYSPAWN_CONCURRENCY', 1, 1000) ?? merged.concurrency ?? 4,
    timeoutS: envNumber(env, 'POLYSPAWN_TIMEOUT_S', 1, MAX_TIMEOUT_S) ?? merged.timeout_s ?? 1800,
    killGraceMs: (envNumber(env, 'POLYSPAWN_KILL_GRACE_S', 0, 300) ?? merged.kill_grace_s ?? 5) * 1000,
    backends: {},
    files,
    userConfigDir: userDir,
    agentsDir: resolve(projectDir, env.POLYSPAWN_AGENTS_DIR || merged.agents_dir || join('.polyspawn', 'agents')),
    channel: envFlag(env, 'POLYSPAWN_CHANNEL') ?? merged.channel ?? true,
    allowCwdOutsideProject:
      envFlag(env, 'POLYSPAWN_ALLOW_CWD_OUTSIDE_PROJECT') ?? merged.allow_cwd_outside_project ?? false,
    isolation: isolationFrom(env) ?? merged.isolation ?? 'none',
    allowCallerSandbox: envFlag(env, 'POLYSPAWN_ALLOW_CALLER_SANDBOX') ?? merged.allow_caller_sandbox ?? false,
    teamMaxAgents: Math.floor(
      envNumber(env, 'POLYSPAWN_TEAM_MAX_AGENTS', 1, TEAM_MAX_AGENTS_LIMIT) ??
        merged.team_max_agents ??
        DEFAULT_TEAM_MAX_AGENTS,
    ),
    projectConfig,
    acpAgents,
  };
  for (const backend of everyBackend)
    config.backends[backend.name] = backendSettings(backend, merged.backends?.[backend.name] ?? {}, env);
  return config;
}

/**
 * The user's config file, then the project's (without what only the user may set), merged: a
 * later file's setting wins, a backend's settings merged key by key.
 */
function readConfigFiles(
  env: NodeJS.ProcessEnv,
  cwd: string,
  projectDir: string,
  userDir: string,
): {
  files: string[];
  merged: FileConfig;
  projectConfig: ProjectConfig | undefined;
  userFile: string;
  /** What the user's own file says of each backend (a project's file said no more than `merged` holds over it). */
  userBackends: NonNullable<FileConfig['backends']>;
} {
  // POLYSPAWN_CONFIG is the user's choice, made where the server is started: trusted.
  const userFile = env.POLYSPAWN_CONFIG ? resolve(cwd, env.POLYSPAWN_CONFIG) : join(userDir, 'config.json');
  const projectFile = env.POLYSPAWN_CONFIG ? undefined : join(projectDir, 'polyspawn.config.json');
  if (env.POLYSPAWN_CONFIG && !existsSync(userFile)) {
    throw new ConfigError(`POLYSPAWN_CONFIG names ${userFile}, which does not exist`);
  }
  const files = [userFile, ...(projectFile ? [projectFile] : [])].filter((f) => existsSync(f));
  let projectConfig: ProjectConfig | undefined;
  let userBackends: NonNullable<FileConfig['backends']> = {};
  const layers = files.map((file) => {
    const layer = readConfigFile(file);
    if (file !== projectFile) {
      userBackends = layer.backends ?? {};
      return layer;
    }
    const project = projectLayer(layer, file, projectDir, userFile);
    projectConfig = project.said;
    return project.layer;
  });
  const merged: FileConfig = {};
  for (const layer of layers) {
    Object.assign(merged, { ...layer, backends: { ...merged.backends } });
    for (const [name, settings] of Object.entries(layer.backends ?? {})) {
      merged.backends![name] = { ...merged.backends![name], ...settings };
    }
  }
  return { files, merged, projectConfig, userFile, userBackends };
}

/**
 * What a project's file may not say of a backend, taken back out of `merged` and said: settings
 * for a backend that is not here (an ACP agent this user has not declared: the repository cannot
 * know which agents its users declare, so it is no reason to stop), and an ACP agent's
 * permission mode that answers its permission requests more loosely than the user's (ask →
 * allow): what an agent may do without asking, only the user says. Stricter is kept.
 */
function keepProjectWithinUser(
  merged: FileConfig,
  user: NonNullable<FileConfig['backends']>,
  said: ProjectConfig,
  known: ReadonlySet<string>,
  acpAgents: readonly AcpBackend[],
  env: NodeJS.ProcessEnv,
): void {
  const unsay = (prefix: string) => {
    said.changed = said.changed.filter((c) => !c.startsWith(prefix));
  };
  for (const name of Object.keys(merged.backends ?? {})) {
    if (known.has(name) || user[name]) continue;
    delete merged.backends![name];
    unsay(`backends.${name}.`);
    said.ignored.push(`backends.${name} (no backend of that name here: an ACP agent is declared in acp_agents)`);
  }
  for (const agent of acpAgents) {
    const projectMode = merged.backends?.[agent.name]?.permission;
    const userMode =
      env[envName(agent.name, 'PERMISSION')] || user[agent.name]?.permission || agent.permissionModes[0]!;
    if (projectMode === undefined || projectMode === userMode) continue;
    const answer = agent.acp.permissions[projectMode];
    const floor = agent.acp.permissions[userMode];
    if (answer !== undefined && floor !== undefined && !looserThan(answer, floor)) continue;
    merged.backends![agent.name] = { ...merged.backends![agent.name], permission: user[agent.name]?.permission };
    if (merged.backends![agent.name]!.permission === undefined) delete merged.backends![agent.name]!.permission;
    unsay(`backends.${agent.name}.permission `);
    said.ignored.push(
      `backends.${agent.name}.permission ${JSON.stringify(projectMode)} (` +
        (answer === undefined
          ? `no such mode: ${agent.permissionModes.join(', ')}`
          : `it answers permission requests "${answer}", looser than "${userMode}"'s "${floor}"`) +
        ')',
    );
  }
}

/** One backend's settings: the environment's over the files', checked against what the backend can do. */
function backendSettings(
  backend: Backend,
  file: NonNullable<FileConfig['backends']>[string],
  env: NodeJS.ProcessEnv,
): Config['backends'][string] {
  const baseUrlEnv = envName(backend.name, 'BASE_URL');
  const baseUrlRaw = env[baseUrlEnv] || file.base_url;
  if (baseUrlRaw && backend.kind !== 'api') {
    throw new ConfigError(`${backend.name}: base_url (${baseUrlEnv}) applies only to API backends`);
  }
  const passEnv = envList(env, envName(backend.name, 'ENV')) ?? file.env ?? [];
  if (passEnv.length && backend.kind !== 'cli') {
    throw new ConfigError(
      `${backend.name}: env (${envName(backend.name, 'ENV')}) applies only to CLI backends, which run as processes`,
    );
  }
  const sandboxEnv = envName(backend.name, 'SANDBOX');
  const fileSandbox = sandboxSettings(file.sandbox ?? 'none');
  const sandbox = { ...fileSandbox, mode: sandboxMode(env, sandboxEnv) ?? fileSandbox.mode };
  if (sandbox.mode !== 'none' && backend.kind !== 'cli') {
    throw new ConfigError(
      `${backend.name}: sandbox (${sandboxEnv}) applies only to CLI backends, which run as processes`,
    );
  }
  const settings = {
    enabled: envFlag(env, envName(backend.name, 'ENABLED')) ?? file.enabled ?? true,
    permission: env[envName(backend.name, 'PERMISSION')] || file.permission || defaultPermission(backend),
    allowTools: envList(env, envName(backend.name, 'ALLOW_TOOLS')) ?? file.allow_tools ?? [],
    denyTools: envList(env, envName(backend.name, 'DENY_TOOLS')) ?? file.deny_tools ?? [],
    bin: (backend.kind === 'cli' && env[backend.binEnv]) || file.bin || undefined,
    env: passEnv,
    sandbox,
    ...(baseUrlRaw
      ? { baseUrl: baseUrl(baseUrlRaw, env[baseUrlEnv] ? baseUrlEnv : `backends.${backend.name}.base_url`) }
      : {}),
  };
  if (backend.kind === 'cli') {
    if (!backend.permissionModes.includes(settings.permission)) {
      throw new ConfigError(
        `${backend.name}: permission "${settings.permission}" is not one of ${backend.permissionModes.join(', ')} ` +
          `(set backends.${backend.name}.permission or ${envName(backend.name, 'PERMISSION')})`,
      );
    }
    if (!backend.supportsToolLists && (settings.allowTools.length || settings.denyTools.length)) {
      throw new ConfigError(`${backend.name} has no per-tool allow or deny lists: use its permission setting instead`);
    }
  }
  return settings;
}

const defaultPermission = (backend: Backend) => (backend.kind === 'cli' ? backend.permissionModes[0] : 'none');

/**
 * The state folder of another live process of this user, as it loaded its config (from the
 * environment and working folder it was started with): whose project a daemon serves.
 */
function processStateDir(backends: readonly Backend[], pid: number): string | undefined {
  const launch = processLaunch(pid);
  try {
    return launch && loadConfig(backends, launch.env, launch.cwd).stateDir;
  } catch {
    return undefined;
  }
}

/** The project's daemon, if daemon.json proves to name this user's daemon for this state folder (src/lib/daemon-file.ts). */
export const projectDaemonOf = (backends: readonly Backend[], stateDir: string): DaemonState =>
  projectDaemon(stateDir, (pid) => processStateDir(backends, pid));
