// Settings: defaults, then the user's config file, then the project's, then environment
// variables (what an MCP client's `env` block sets). Defaults work with no file at all.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import type { Backend, BackendSettings } from '../../backends/types.js';
import { ConfigError } from '../lib/errors.js';

export type Config = {
  projectDir: string;
  stateDir: string;
  /** IAC.md: where, and how many finished interactions it shows. */
  iacFile: string;
  iacEntries: number;
  concurrency: number;
  timeoutS: number;
  killGraceMs: number;
  backends: Record<string, BackendSettings & { enabled: boolean; baseUrl?: string }>;
  /** The config and models files that were read, for `doctor` and the logs. */
  files: string[];
  userConfigDir: string;
  /** The project's agent definitions (<name>/agent.md): .polyspawn/agents unless configured. */
  agentsDir: string;
  /** Whether running CLI agents get a channel to ask the orchestrator (ask_parent). */
  channel: boolean;
};

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
  })
  .partial()
  .strict();

/** The longest a job may run: a week. */
export const MAX_TIMEOUT_S = 7 * 86400;
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
    backends: z.record(z.string(), backendFileSchema),
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

function envList(env: NodeJS.ProcessEnv, name: string): string[] | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The user's project: POLYSPAWN_PROJECT_DIR, else the working directory. */
export function projectDirFrom(env: NodeJS.ProcessEnv, cwd: string): string {
  return resolve(cwd, env.POLYSPAWN_PROJECT_DIR || '.');
}

export function loadConfig(backends: readonly Backend[], env: NodeJS.ProcessEnv, cwd: string): Config {
  const projectDir = projectDirFrom(env, cwd);
  const userDir = userConfigDir(env);
  const candidates = env.POLYSPAWN_CONFIG
    ? [resolve(cwd, env.POLYSPAWN_CONFIG)]
    : [join(userDir, 'config.json'), join(projectDir, 'polyspawn.config.json')];
  if (env.POLYSPAWN_CONFIG && !existsSync(candidates[0]!)) {
    throw new ConfigError(`POLYSPAWN_CONFIG names ${candidates[0]}, which does not exist`);
  }
  const files = candidates.filter((f) => existsSync(f));
  const layers = files.map(readConfigFile);
  const merged: FileConfig = {};
  for (const layer of layers) {
    Object.assign(merged, { ...layer, backends: { ...merged.backends } });
    for (const [name, settings] of Object.entries(layer.backends ?? {})) {
      merged.backends![name] = { ...merged.backends![name], ...settings };
    }
  }

  const known = new Set(backends.map((b) => b.name));
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
  };

  for (const backend of backends) {
    const file = merged.backends?.[backend.name] ?? {};
    const baseUrlEnv = envName(backend.name, 'BASE_URL');
    const baseUrlRaw = env[baseUrlEnv] || file.base_url;
    if (baseUrlRaw && backend.kind !== 'api') {
      throw new ConfigError(`${backend.name}: base_url (${baseUrlEnv}) applies only to API backends`);
    }
    const settings = {
      enabled: envFlag(env, envName(backend.name, 'ENABLED')) ?? file.enabled ?? true,
      permission: env[envName(backend.name, 'PERMISSION')] || file.permission || defaultPermission(backend),
      allowTools: envList(env, envName(backend.name, 'ALLOW_TOOLS')) ?? file.allow_tools ?? [],
      denyTools: envList(env, envName(backend.name, 'DENY_TOOLS')) ?? file.deny_tools ?? [],
      bin: (backend.kind === 'cli' && env[backend.binEnv]) || file.bin || undefined,
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
        throw new ConfigError(
          `${backend.name} has no per-tool allow or deny lists: use its permission setting instead`,
        );
      }
    }
    config.backends[backend.name] = settings;
  }
  return config;
}

/** A yes/no variable: 0, false, no, off say no; anything else set says yes. */
function envFlag(env: NodeJS.ProcessEnv, name: string): boolean | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  return !/^(0|false|no|off)$/i.test(raw);
}

const defaultPermission = (backend: Backend) => (backend.kind === 'cli' ? backend.permissionModes[0] : 'none');
