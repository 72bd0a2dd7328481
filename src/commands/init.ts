// `polyspawn init`: writes the MCP configuration that starts polyspawn into each client's files
// (INIT_USAGE lists them), merged into what the user already has. Rules: never drop a user's other
// servers or settings, never add ours twice, say what changed, and leave a file that cannot be
// parsed byte-for-byte untouched.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as jsonc from 'jsonc-parser';
import { parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import writeFileAtomic from 'write-file-atomic';
import { backends as registry } from '../../backends/registry.js';
import type { ApiBackend, Backend } from '../../backends/types.js';
import { DEFAULT_WAIT_S } from '../jobs/table.js';
import { NESTING_ENV } from '../jobs/agents/nesting.js';
import { InputError } from '../lib/errors.js';
import { parseCommandArgs, type CommandIo } from './io.js';
import { makeDirs } from '../lib/fs.js';
import { loadConfig, projectDaemonOf } from '../config/config.js';
import { ignoreStateDir } from './ignore-store.js';

/** The key every client knows polyspawn by: tools read `mcp__agents__spawn_codex` in Claude Code. */
const SERVER_KEY = 'agents';

const CLIENTS = ['claude', 'vscode', 'codex'] as const;
export type Client = (typeof CLIENTS)[number];
const CLIENT_NAMES: Record<Client, string> = { claude: 'Claude Code', vscode: 'VS Code', codex: 'Codex' };

export type ServerCommand = { command: string; args: string[] };
/** The project's shared server (`polyspawn daemon`), reached over HTTP with the token in a variable. */
type HttpEndpoint = { url: string };
export type ServerTarget = ServerCommand | HttpEndpoint;
const isHttp = (server: ServerTarget): server is HttpEndpoint => 'url' in server;

/** The variable the clients read the shared server's token from (\`polyspawn daemon\`'s, .polyspawn/http-token). */
const TOKEN_VARIABLE = 'POLYSPAWN_TOKEN';
const VSCODE_TOKEN_INPUT = 'polyspawn-token';

/** Codex cuts a tool call at tool_timeout_sec (default 60 s): well above wait_for_agents' default wait. */
export const CODEX_TOOL_TIMEOUT_S = 300;
/** Codex gives a server 10 s to start by default; `npx` fetching the package can take longer. */
const CODEX_STARTUP_TIMEOUT_S = 30;
/**
 * polyspawn's own folders (its config: user config.json, models.json, api_keys.json; its code
 * cache) and the nesting marker, so a codex agent's polyspawn knows how deep it runs.
 */
const OWN_ENV = ['XDG_CONFIG_HOME', 'XDG_CACHE_HOME', ...NESTING_ENV];

/**
 * Codex starts MCP servers with a cleared environment (HOME, PATH, USER and a few more):
 * these are the names polyspawn and the CLIs it runs may need, forwarded when they are set:
 * the API backends' keys, the CLIs' logins, polyspawn's own folders.
 */
function codexEnvVars(backends: readonly Backend[]): string[] {
  const keys = backends.flatMap((b) => (b.kind === 'api' ? b.keyNames : []));
  const logins = backends.flatMap((b) => (b.kind === 'cli' ? b.loginEnv : []));
  return [...new Set([...keys, ...logins, ...OWN_ENV])];
}

type VscodeKeyInput = { env: string; id: string; description: string };

/**
 * VS Code prompts for these once (stored in its secret storage), one per API backend, under
 * its first key name; an empty answer skips the backend.
 */
function vscodeKeyInputs(backends: readonly Backend[]): VscodeKeyInput[] {
  return backends.flatMap((b) => {
    if (b.kind !== 'api') return [];
    const env = b.keyNames[0]!;
    return [
      {
        env,
        id: env.toLowerCase().replace(/_/g, '-'),
        description: `${b.keyLabel} for spawn_${b.name} (leave empty to skip ${b.name})`,
      },
    ];
  });
}

type FileAction = 'created' | 'updated' | 'unchanged' | 'kept' | 'refused';

export type FileReport = {
  client: Client;
  file: string;
  action: FileAction;
  /** What was added or changed (created/updated), or why nothing was (kept/refused). */
  details: string[];
};

/** A file init will not touch, with one sentence that says what to do. */
class Refusal extends Error {}

type Merge = { text: string; details: string[] };

// --- JSON ------------------------------------------------------------------------------------

function formatting(text: string): jsonc.FormattingOptions {
  const indent = /^([ \t]+)\S/m.exec(text)?.[1] ?? '  ';
  return {
    insertSpaces: !indent.startsWith('\t'),
    tabSize: indent.startsWith('\t') ? 1 : indent.length,
    eol: text.includes('\r\n') ? '\r\n' : '\n',
  };
}

/** Sets one value in place: jsonc-parser's edits keep the user's formatting and, in JSONC, comments. */
function edit(text: string, path: jsonc.JSONPath, value: unknown): string {
  if (text.trim() === '') return `${JSON.stringify(setIn({}, path, value), null, 2)}\n`;
  return jsonc.applyEdits(text, jsonc.modify(text, path, value, { formattingOptions: formatting(text) }));
}

function setIn(root: Record<string, unknown>, path: jsonc.JSONPath, value: unknown): Record<string, unknown> {
  let at: Record<string, unknown> = root;
  path.forEach((key, i) => {
    if (i === path.length - 1) at[key as string] = value;
    else at = (at[key as string] ??= {}) as Record<string, unknown>;
  });
  return root;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The file's top-level object. Claude Code's files are strict JSON; VS Code's are JSONC. */
function parseJsonObject(text: string, file: string, allowComments: boolean): Record<string, unknown> {
  if (text.trim() === '') return {};
  let value: unknown;
  if (allowComments) {
    const errors: jsonc.ParseError[] = [];
    value = jsonc.parse(text, errors, { allowTrailingComma: true, disallowComments: false });
    if (errors.length) {
      const { line, column } = position(text, errors[0]!.offset);
      throw new Refusal(
        `${file} is not valid JSON with comments (${jsonc.printParseErrorCode(errors[0]!.error)} at line ${line}, column ${column}): fix it, then run init again`,
      );
    }
  } else {
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new Refusal(`${file} is not valid JSON (${(error as Error).message}): fix it, then run init again`);
    }
  }
  if (!isObject(value)) throw new Refusal(`${file} does not hold a JSON object: fix it, then run init again`);
  return value;
}

function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: before.at(-1)!.length + 1 };
}

const commandLine = (entry: Record<string, unknown>) =>
  (typeof entry.url === 'string' ? entry.url : '') ||
  [entry.command, ...(Array.isArray(entry.args) ? entry.args : [])].filter((p) => typeof p === 'string').join(' ') ||
  JSON.stringify(entry);

/** An `agents` entry of an earlier polyspawn (an older path, npx, or this repository's relative form). */
function isPolyspawnEntry(entry: Record<string, unknown>): boolean {
  const parts = [entry.command, ...(Array.isArray(entry.args) ? entry.args : [])].filter(
    (p): p is string => typeof p === 'string',
  );
  if (typeof entry.url === 'string') return /POLYSPAWN_TOKEN|polyspawn-token/.test(JSON.stringify(entry.headers ?? {}));
  return parts.some((p) => p.includes('polyspawn') || /(^|[/\\])dist[/\\]src[/\\]cli\.js$/.test(p));
}

/**
 * Sets `<containerKey>.agents` to `wanted`, keeping what the user added to an earlier polyspawn
 * entry (env, and any other field) and refusing to replace someone else's `agents` server.
 */
function mergeServer(
  text: string,
  file: string,
  containerKey: string,
  wanted: Record<string, unknown>,
  allowComments: boolean,
): Merge {
  const root = parseJsonObject(text, file, allowComments);
  const container = root[containerKey];
  if (container !== undefined && !isObject(container))
    throw new Refusal(`${file}: "${containerKey}" is not an object: fix it, then run init again`);
  const existing = container?.[SERVER_KEY];
  if (existing === undefined) {
    return {
      text: edit(text, [containerKey, SERVER_KEY], wanted),
      details: [`added ${containerKey}.${SERVER_KEY}: ${commandLine(wanted)}`],
    };
  }
  if (!isObject(existing) || !isPolyspawnEntry(existing)) {
    throw new Refusal(
      `${file}: ${containerKey}.${SERVER_KEY} already runs something else (${isObject(existing) ? commandLine(existing) : JSON.stringify(existing)}): ` +
        `rename or remove that entry, then run init again`,
    );
  }
  let out = text;
  const details: string[] = [];
  // From stdio to HTTP or back: the other kind's fields go.
  const otherKind = 'url' in wanted ? ['command', 'args', 'env'] : ['url', 'headers'];
  for (const key of otherKind) {
    if (existing[key] !== undefined) {
      out = edit(out, [containerKey, SERVER_KEY, key], undefined);
      details.push(`removed ${containerKey}.${SERVER_KEY}.${key}`);
    }
  }
  for (const [key, value] of Object.entries(wanted)) {
    if (key === 'env' && isObject(value)) {
      const env = existing.env;
      if (env !== undefined && !isObject(env))
        throw new Refusal(`${file}: ${containerKey}.${SERVER_KEY}.env is not an object: fix it, then run init again`);
      for (const [name, v] of Object.entries(value)) {
        if (env?.[name] === undefined) {
          out = edit(out, [containerKey, SERVER_KEY, 'env', name], v);
          details.push(`added ${containerKey}.${SERVER_KEY}.env.${name}`);
        }
      }
    } else if (JSON.stringify(existing[key]) !== JSON.stringify(value)) {
      out = edit(out, [containerKey, SERVER_KEY, key], value);
      details.push(
        `set ${containerKey}.${SERVER_KEY}.${key}${key === 'args' || key === 'command' ? ` (was: ${commandLine(existing)})` : ''}`,
      );
    }
  }
  return { text: out, details: [...new Set(details)] };
}

function mergeClaudeMcpJson(text: string, server: ServerTarget, file = '.mcp.json'): Merge {
  const entry = isHttp(server)
    ? // Claude Code expands \${VAR} in .mcp.json: the token stays in the environment.
      { type: 'http', url: server.url, headers: { Authorization: `Bearer \${${TOKEN_VARIABLE}}` } }
    : { type: 'stdio', command: server.command, args: server.args };
  return mergeServer(text, file, 'mcpServers', entry, false);
}

function mergeClaudeSettings(text: string, file = '.claude/settings.local.json'): Merge {
  const root = parseJsonObject(text, file, false);
  let out = text;
  const details: string[] = [];
  const enabled = root.enabledMcpjsonServers;
  if (enabled !== undefined && !(Array.isArray(enabled) && enabled.every((e) => typeof e === 'string'))) {
    throw new Refusal(`${file}: "enabledMcpjsonServers" is not a list of names: fix it, then run init again`);
  }
  if (!enabled?.includes(SERVER_KEY)) {
    out = edit(out, ['enabledMcpjsonServers'], [...(enabled ?? []), SERVER_KEY]);
    details.push(`added "${SERVER_KEY}" to enabledMcpjsonServers`);
  }
  const disabled = root.disabledMcpjsonServers;
  if (Array.isArray(disabled) && disabled.includes(SERVER_KEY)) {
    out = edit(
      out,
      ['disabledMcpjsonServers'],
      disabled.filter((d) => d !== SERVER_KEY),
    );
    details.push(`removed "${SERVER_KEY}" from disabledMcpjsonServers`);
  }
  return { text: out, details };
}

function mergeVscodeMcpJson(
  text: string,
  server: ServerTarget,
  backends: readonly Backend[],
  file = '.vscode/mcp.json',
): Merge {
  // Over HTTP the daemon holds the API keys: VS Code is asked for the token only.
  const keyInputs: Omit<VscodeKeyInput, 'env'>[] = isHttp(server)
    ? [{ id: VSCODE_TOKEN_INPUT, description: "polyspawn's token (.polyspawn/http-token in the project)" }]
    : vscodeKeyInputs(backends);
  let entry: Record<string, unknown>;
  if (isHttp(server)) {
    entry = { type: 'http', url: server.url, headers: { Authorization: `Bearer \${input:${VSCODE_TOKEN_INPUT}}` } };
  } else {
    const env: Record<string, string> = { POLYSPAWN_PROJECT_DIR: '${workspaceFolder}' };
    for (const input of vscodeKeyInputs(backends)) env[input.env] = `\${input:${input.id}}`;
    entry = { type: 'stdio', command: server.command, args: server.args, env };
  }
  const merged = mergeServer(text, file, 'servers', entry, true);
  let out = merged.text;
  const details = [...merged.details];
  const root = parseJsonObject(out, file, true);
  const inputs = root.inputs;
  if (inputs !== undefined && !Array.isArray(inputs))
    throw new Refusal(`${file}: "inputs" is not a list: fix it, then run init again`);
  const ids = new Set((inputs ?? []).map((i) => (isObject(i) ? i.id : undefined)));
  const missing = keyInputs
    .filter((input) => !ids.has(input.id))
    .map((input) => ({
      type: 'promptString',
      id: input.id,
      description: input.description,
      password: true,
    }));
  if (inputs === undefined && missing.length) out = edit(out, ['inputs'], missing);
  else {
    // Appended one at a time, so the user's own inputs keep their place and formatting.
    missing.forEach((value, i) => {
      out = jsonc.applyEdits(
        out,
        jsonc.modify(out, ['inputs', inputs!.length + i], value, {
          formattingOptions: formatting(out),
          isArrayInsertion: true,
        }),
      );
    });
  }
  const added = missing.map((m) => m.id);
  if (added.length)
    details.push(
      `added inputs ${added.join(', ')} (password prompts for the ${isHttp(server) ? 'token' : 'API keys'})`,
    );
  return { text: out, details };
}

// --- TOML ------------------------------------------------------------------------------------

function codexTable(server: ServerTarget, backends: readonly Backend[]): string {
  const how = isHttp(server)
    ? { url: server.url, bearer_token_env_var: TOKEN_VARIABLE }
    : { command: server.command, args: server.args, env_vars: codexEnvVars(backends) };
  const table = {
    ...how,
    startup_timeout_sec: CODEX_STARTUP_TIMEOUT_S,
    tool_timeout_sec: CODEX_TOOL_TIMEOUT_S,
  };
  return (
    `# polyspawn: delegate work to other coding agents (written by \`polyspawn init\`).\n` +
    `# tool_timeout_sec stays well above wait_for_agents' ${DEFAULT_WAIT_S} s default wait.\n` +
    stringifyToml({ mcp_servers: { [SERVER_KEY]: table } }).trim() +
    '\n'
  );
}

/** Appends [mcp_servers.agents] to a Codex config, or says why it does not. Never rewrites a byte. */
function mergeCodexToml(
  text: string,
  server: ServerTarget,
  backends: readonly Backend[],
  file = 'config.toml',
): Merge & { kept?: boolean } {
  let parsed: Record<string, unknown>;
  try {
    parsed = parseToml(text) as Record<string, unknown>;
  } catch (error) {
    const e = error as Error & { line?: number; column?: number };
    const where = e.line ? ` at line ${e.line}, column ${e.column}` : '';
    throw new Refusal(
      `${file} is not valid TOML (${e.message.split('\n', 1)[0]}${where}): fix it, then run init again`,
    );
  }
  const servers = parsed.mcp_servers;
  if (servers !== undefined && !isObject(servers))
    throw new Refusal(`${file}: mcp_servers is not a table: fix it, then run init again`);
  const existing = servers?.[SERVER_KEY];
  if (existing !== undefined) {
    const runs = isObject(existing) ? commandLine(existing) : String(existing);
    const ours = commandLine({ ...server });
    return {
      text,
      kept: true,
      details: [
        `[mcp_servers.${SERVER_KEY}] is already there (runs: ${runs}); left as it is` +
          (runs === ours ? '' : `. To have init write it anew (runs: ${ours}), delete that table and run init again`),
      ],
    };
  }
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const separator = text === '' ? '' : text.endsWith('\n') ? eol : eol + eol;
  const out = text + separator + codexTable(server, backends).replace(/\n/g, eol);
  try {
    parseToml(out);
  } catch {
    // e.g. mcp_servers written as an inline table, which a [mcp_servers.agents] table cannot extend.
    throw new Refusal(
      `${file}: a [mcp_servers.${SERVER_KEY}] table cannot be added to how this file writes mcp_servers: add it by hand:\n${codexTable(server, backends)}`,
    );
  }
  return {
    text: out,
    details: [
      `added [mcp_servers.${SERVER_KEY}]: ${commandLine({ ...server })} (tool_timeout_sec = ${CODEX_TOOL_TIMEOUT_S})`,
    ],
  };
}

// --- the command -----------------------------------------------------------------------------

type InitOptions = {
  /** The project folder (.mcp.json, .vscode/ and .claude/ go here). */
  dir: string;
  clients: readonly Client[];
  server: ServerTarget;
  /** Where Codex keeps config.toml. */
  codexHome: string;
  /** The backends whose keys and logins the configuration passes on (default: the registry). */
  backends?: readonly Backend[];
  /** The API backends VS Code asks a key for (default: every one); see vscodeKeyChoice. */
  vscodeKeys?: readonly string[];
};

type Target = { client: Client; file: string; merge: (text: string, shown: string) => Merge & { kept?: boolean } };

/** Reads, merges and writes each client's files; a file that cannot be merged is left untouched. */
export function runInit(options: InitOptions): FileReport[] {
  const backends = options.backends ?? registry;
  const targets: Target[] = [];
  if (options.clients.includes('claude')) {
    targets.push({
      client: 'claude',
      file: join(options.dir, '.mcp.json'),
      merge: (t, f) => mergeClaudeMcpJson(t, options.server, f),
    });
    targets.push({
      client: 'claude',
      file: join(options.dir, '.claude', 'settings.local.json'),
      merge: (t, f) => mergeClaudeSettings(t, f),
    });
  }
  if (options.clients.includes('vscode')) {
    targets.push({
      client: 'vscode',
      file: join(options.dir, '.vscode', 'mcp.json'),
      merge: (t, f) =>
        mergeVscodeMcpJson(
          t,
          options.server,
          backends.filter((b) => !options.vscodeKeys || options.vscodeKeys.includes(b.name)),
          f,
        ),
    });
  }
  if (options.clients.includes('codex')) {
    targets.push({
      client: 'codex',
      file: join(options.codexHome, 'config.toml'),
      merge: (t, f) => mergeCodexToml(t, options.server, backends, f),
    });
  }
  return targets.map((target) => applyTarget(target, options.dir));
}

function applyTarget({ client, file, merge }: Target, dir: string): FileReport {
  const shown = displayPath(file, dir);
  let before: string | undefined;
  try {
    before = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT')
      return {
        client,
        file,
        action: 'refused',
        details: [`${shown} could not be read (${code}): fix its permissions, then run init again`],
      };
  }
  let result: Merge & { kept?: boolean };
  try {
    result = merge(before ?? '', shown);
  } catch (error) {
    if (error instanceof Refusal) return { client, file, action: 'refused', details: [error.message] };
    throw error;
  }
  if (result.kept) return { client, file, action: 'kept', details: result.details };
  if (before !== undefined && result.text === before)
    return { client, file, action: 'unchanged', details: ['already set up'] };
  try {
    // A client's folders (.vscode, .claude, ~/.codex) get the umask's mode, not polyspawn's private one.
    makeDirs(dirname(file), 0o777);
    writeFileAtomic.sync(file, result.text);
  } catch (error) {
    return {
      client,
      file,
      action: 'refused',
      details: [`${shown} could not be written (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`],
    };
  }
  return { client, file, action: before === undefined ? 'created' : 'updated', details: result.details };
}

function displayPath(file: string, dir: string): string {
  const rel = relative(dir, file);
  if (!rel.startsWith('..') && !rel.startsWith(sep)) return rel;
  const home = homedir();
  return file.startsWith(home + sep) ? `~${file.slice(home.length)}` : file;
}

function formatInitReport(
  dir: string,
  server: ServerTarget,
  reports: FileReport[],
  keys: KeyChoice | undefined,
  storeLines: string[],
): string {
  const out = [
    `polyspawn init in ${dir}`,
    isHttp(server)
      ? `The clients reach the project's daemon at ${server.url}, with the token from ${TOKEN_VARIABLE} (VS Code asks for it)`
      : `The server runs: ${commandLine(server)}`,
    '',
  ];
  for (const r of reports) {
    out.push(`${CLIENT_NAMES[r.client].padEnd(11)} ${displayPath(r.file, dir)}: ${r.action}`);
    for (const d of r.details) out.push(`              ${d.replace(/\n/g, '\n              ')}`);
  }
  if (keys)
    out.push(
      '',
      `VS Code asks for ${keys.names.length ? `the API keys of ${keys.names.join(', ')}` : 'no API key'} ${keys.why}`,
    );
  out.push('', ...storeLines, '');
  const refused = reports.filter((r) => r.action === 'refused');
  if (refused.length) out.push(`${refused.length} file(s) left untouched: see above.`);
  const clients = [...new Set(reports.filter((r) => r.action !== 'refused').map((r) => CLIENT_NAMES[r.client]))];
  if (clients.length)
    out.push(
      `Restart ${clients.join(', ')} (or reload its MCP servers) to pick polyspawn up; \`polyspawn doctor\` shows which backends are usable.`,
    );
  return `${out.join('\n')}\n`;
}

/** The shared server's endpoint: on --port, or where the project's daemon listens now. */
function daemonUrl(port: string | undefined, dir: string, io: CommandIo): string {
  if (port !== undefined) {
    if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535)
      throw new InputError(`--port "${port}" is not a port number (1 to 65535)`);
    return `http://127.0.0.1:${port}/mcp`;
  }
  const daemon = projectDaemonOf(registry, loadConfig(registry, io.env, dir).stateDir);
  if (daemon.state !== 'running')
    throw new InputError(
      'init --http needs a port the daemon will keep: pass --port N and start the daemon with `polyspawn daemon start --port N`',
    );
  return daemon.endpoint;
}

type KeyChoice = { names: string[]; why: string };

/**
 * The API backends VS Code is to ask a key for: those --keys names ("none": none), else those
 * whose key init's own environment holds (VS Code started from a desktop may not have it). A key
 * in api_keys.json needs no prompt: polyspawn reads that file itself.
 */
function vscodeKeyChoice(keys: string | undefined, env: NodeJS.ProcessEnv, backends: readonly Backend[]): KeyChoice {
  const api = backends.filter((b): b is ApiBackend => b.kind === 'api');
  const all = api.map((b) => b.name).join(',');
  if (keys !== undefined) {
    const names = keys === 'none' ? [] : keys.split(',').map((k) => k.trim());
    const unknown = names.filter((n) => !api.some((b) => b.name === n));
    if (unknown.length || (keys !== 'none' && names.length === 0))
      throw new InputError(
        `--keys takes API backends, comma-separated (${all}), or none; not "${unknown.join(',') || keys}"`,
      );
    return { names, why: '(--keys)' };
  }
  const names = api.filter((b) => b.keyNames.some((n) => env[n]?.trim())).map((b) => b.name);
  return {
    names,
    why: names.length
      ? `(their keys are in this environment; --keys ${all} for others)`
      : `(none is in this environment, and a key in api_keys.json needs none; --keys ${all} to be asked)`,
  };
}

/** What init says of the run store and git (and does, unless --no-gitignore), and of IAC.md. */
function storeAndGit(dir: string, io: CommandIo, skip: boolean): string[] {
  let git: string;
  if (skip) git = '.gitignore left as it is (--no-gitignore)';
  else {
    try {
      const config = loadConfig(registry, io.env, dir);
      // A cloned repository's config could name any folder (src) as the store, to hide it from git.
      const movedByProject =
        !io.env.POLYSPAWN_STATE_DIR && config.projectConfig?.changed.some((c) => c.startsWith('state_dir '));
      git = movedByProject
        ? `no .gitignore written: the project's ${basename(config.projectConfig!.file)} puts the run store in ${config.stateDir}; add that folder to .gitignore yourself if it is right`
        : ignoreStateDir(dir, config.stateDir);
    } catch (error) {
      git = `no .gitignore written: the config cannot be read (${(error as Error).message})`;
    }
  }
  return [
    `Git         ${git}`,
    'IAC.md      the record of every agent, written in the project: meant to be read, and yours to commit or not',
  ];
}

/** dist/src/cli.js of this installation, beside this file's folder. */
export const installedCli = (): string => fileURLToPath(new URL('../cli.js', import.meta.url));

export const INIT_USAGE = `Usage: polyspawn init [dir] [--claude] [--vscode [--keys a,b|none]] [--codex] [--npx | --http [--port N]]
                      [--no-gitignore]

Writes the MCP configuration that starts polyspawn (server key "${SERVER_KEY}") for each client,
merged into the files that are already there:

  --claude   <dir>/.mcp.json, and "${SERVER_KEY}" in enabledMcpjsonServers of <dir>/.claude/settings.local.json
  --vscode   <dir>/.vscode/mcp.json, with a password prompt (kept by VS Code) for the key of
             each API backend whose key is in this environment, or that --keys names
  --codex    [mcp_servers.${SERVER_KEY}] in $CODEX_HOME/config.toml (default ~/.codex/config.toml)
             with tool_timeout_sec = ${CODEX_TOOL_TIMEOUT_S}

With none of these, all three. dir defaults to the current folder.
The command written is this node and this installation's cli.js, by absolute path, so it works
without anything on PATH; --npx writes \`npx -y polyspawn\` instead (portable, needs the package
to be installable by npx). --http writes the project's shared server instead (polyspawn daemon
start --port N): Claude Code and Codex read its token from $${TOKEN_VARIABLE}, VS Code asks for it
(it is in .polyspawn/http-token). Other servers and settings are kept; a file that cannot be parsed is
left untouched and reported. Exit code 1 when any file was left untouched.

In a git repository, one line (/.polyspawn/, the run store) is appended to <dir>/.gitignore
unless it is there already (--no-gitignore: not); the file is never rewritten, and one that is
a link or cannot be read is left alone and said. IAC.md is meant to be read: commit it or not.
`;

export async function initCommand(argv: string[], io: CommandIo, options: { cli?: string } = {}): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, {
    claude: { type: 'boolean' },
    vscode: { type: 'boolean' },
    codex: { type: 'boolean' },
    npx: { type: 'boolean' },
    http: { type: 'boolean' },
    port: { type: 'string' },
    keys: { type: 'string' },
    'no-gitignore': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return (void io.stdout.write(INIT_USAGE), 0);
  if (positionals.length > 1)
    throw new InputError(`init takes one folder, not ${positionals.length}: ${positionals.join(' ')}`);
  const dir = resolve(io.cwd, positionals[0] ?? '.');
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new InputError(`${dir} is not a folder: create it first, or name your project's folder`);
  const chosen = CLIENTS.filter((c) => values[c]);
  const cli = options.cli ?? installedCli();
  if (!values.http && !values.npx && !existsSync(cli))
    throw new InputError(`${cli} is missing: build polyspawn first (npm run build), or pass --npx`);
  const server: ServerTarget = values.http
    ? { url: daemonUrl(values.port, dir, io) }
    : values.npx
      ? { command: 'npx', args: ['-y', 'polyspawn'] }
      : { command: process.execPath, args: [cli] };
  const codexHome = io.env.CODEX_HOME ? resolve(io.cwd, io.env.CODEX_HOME) : join(io.env.HOME || homedir(), '.codex');
  const clients = chosen.length ? chosen : CLIENTS;
  if (values.keys !== undefined && (!clients.includes('vscode') || values.http))
    throw new InputError(
      '--keys chooses the API keys VS Code asks for: use it with --vscode (or no client option), not --http',
    );
  const keyChoice = vscodeKeyChoice(values.keys, io.env, registry);
  const reports = runInit({ dir, clients, server, codexHome, vscodeKeys: keyChoice.names });
  const vscodeKeys = clients.includes('vscode') && !isHttp(server) ? keyChoice : undefined;
  const storeLines = storeAndGit(dir, io, values['no-gitignore'] === true);
  io.stdout.write(formatInitReport(dir, server, reports, vscodeKeys, storeLines));
  return reports.some((r) => r.action === 'refused') ? 1 : 0;
}
