// Named agents' definitions: one `agent.md` each, YAML frontmatter for the settings and the body
// for the system prompt (the README shows one). A file that fails the checks is skipped and
// reported (server log, list_agents, `polyspawn doctor`), never fatal; define_agent writes
// files through the same checks.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { z } from 'zod';
import type { Backend, BackendSettings, McpServerSpec } from '../../../backends/types.js';
import { ISOLATION_MODES, timeoutSeconds, type Config, type Isolation } from '../../config/config.js';
import { maxBudgetUsdSchema, maxTurnsSchema } from '../budget.js';
import { resolveModel, type ModelsTable } from '../../config/models.js';
import { sandboxSchema, sandboxSettings, type SandboxSettings } from '../../config/sandbox.js';
import { schemaProblem, type JsonSchema } from '../structured-output.js';
import { ENV_NAME, jsonBytes, SECRET_NAME } from '../../lib/text.js';
import { isInside } from '../../lib/fs.js';
import { MAX_DEPTH } from './nesting.js';
import { PARENT_SERVER } from '../conversation.js';
import type { NamedAgentSettings } from '../table.js';

/** The YAML library, loaded with the first agent file read or written: a project without named agents never pays for it at start. */
let yamlModule: typeof import('yaml') | undefined;
const yaml = () => (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof import('yaml'));

export type AgentScope = 'project' | 'user';

export type AgentDefinition = {
  name: string;
  description: string;
  backend: string;
  /** As written (an alias or a model name); resolved when a job is made. */
  model?: string;
  systemPrompt: string;
  timeoutS?: number;
  /** Its budget: a ceiling its spawns may lower, never raise (src/jobs/spawn.ts). */
  maxTurns?: number;
  maxBudgetUsd?: number;
  permission?: string;
  allow?: string[];
  deny?: string[];
  mcpServers?: Record<string, McpServerSpec>;
  session: boolean;
  allowedCallers?: string[];
  outputSchema?: JsonSchema;
  /** How many levels of agents below this one may start agents of their own (0: none). */
  nesting: number;
  /** false: its runs get no channel to ask the orchestrator. */
  askParent?: false;
  /** Variables its CLI gets by name, secrets included (agent.md's `env`). */
  env?: string[];
  /** "worktree": its runs work in a git worktree of their own. */
  isolation?: Isolation;
  /** The sandbox its runs get, within what the user's config allows (src/config/sandbox.ts). */
  sandbox?: SandboxSettings;
  scope: AgentScope;
  file: string;
};

export type AgentProblem = { file: string; scope: AgentScope; name?: string; problem: string };

export type AgentContext = {
  config: Config;
  models: ModelsTable;
  /** Every backend polyspawn knows (agent names may not take a backend's tool name). */
  backends: readonly Backend[];
};

export const AGENT_FILE = 'agent.md';
const NAME_PATTERN = /^[a-z][a-z0-9_-]*$/;
const MAX_NAME = 48;
/** Each makes a tool that sits in the orchestrator's context all session: tools/list stays bounded. */
export const MAX_AGENTS = 100;
const MAX_FILE_BYTES = 1024 * 1024;
const MAX_PROMPT_CHARS = 200_000;
const MAX_DESCRIPTION_CHARS = 2000;

/** Why `text` is too large a system prompt for `backend` (one it takes on its command line), or undefined. */
export function systemPromptProblem(text: string, backend: Backend): string | undefined {
  const max = backend.maxSystemPromptBytes;
  const bytes = jsonBytes(text);
  if (max === undefined || bytes <= max) return undefined;
  return `too large for ${backend.name}: ${bytes} bytes as a JSON string, and it takes at most ${max} on its command line: shorten it`;
}

const stringList = z.array(z.string().min(1).max(500)).max(200);
/** Variables passed on to the agent's CLI by name, secrets included (a CLI gets no other secret). */
const envNames = z.array(z.string().regex(ENV_NAME, 'must be a variable name')).max(100);
const stringMap = z.record(z.string().min(1).max(200), z.string().max(10_000));
const httpUrl = z
  .string()
  .max(2000)
  .refine((s) => /^https?:\/\/./.test(s), 'must be an http(s) URL');
const mcpServerSchema = z.union([
  z
    .object({
      command: z.string().min(1).max(1000),
      args: z.array(z.string().max(10_000)).max(200).optional(),
      env: stringMap.optional(),
    })
    .strict(),
  z.object({ url: httpUrl, headers: stringMap.optional() }).strict(),
]);

/** The frontmatter keys: snake_case, as written in agent.md and as define_agent takes them. */
const frontmatterSchema = z
  .object({
    name: z.string().optional(),
    description: z
      .string({
        error: (i) =>
          i.input === undefined ? 'is required: say when the orchestrator should use this agent' : 'must be text',
      })
      .max(MAX_DESCRIPTION_CHARS),
    // Missing: checkDefinition's error map names the backends there are.
    backend: z.string({ error: (i) => (i.input === undefined ? undefined : 'must be text') }),
    model: z.string().min(1).max(200).optional(),
    timeout_s: timeoutSeconds().optional(),
    max_turns: maxTurnsSchema().optional(),
    max_budget_usd: maxBudgetUsdSchema().optional(),
    permission: z.string().min(1).max(100).optional(),
    allow: stringList.optional(),
    deny: stringList.optional(),
    mcp_servers: z.record(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/), mcpServerSchema).optional(),
    session: z.boolean().optional(),
    allowed_callers: z.array(z.string().min(1).max(200)).min(1).max(100).optional(),
    output_schema: z.record(z.string(), z.unknown()).optional(),
    allow_nesting: z.union([z.boolean(), z.number().int().min(0).max(MAX_DEPTH)]).optional(),
    ask_parent: z.boolean().optional(),
    env: envNames.optional(),
    isolation: z.enum(ISOLATION_MODES).optional(),
    sandbox: sandboxSchema.optional(),
  })
  .strict();

export type Frontmatter = z.infer<typeof frontmatterSchema>;

/** Why `name` cannot name an agent, or undefined. */
export function nameProblem(name: string, backends: readonly Backend[]): string | undefined {
  // A leading letter: a name is a folder and part of a tool name, never an option (-rf) or a blank (_).
  if (!NAME_PATTERN.test(name))
    return `the name "${name}" must start with a lower-case letter, then lower-case letters, digits, _ and - only`;
  if (name.length > MAX_NAME) return `the name "${name}" is longer than ${MAX_NAME} characters`;
  if (backends.some((b) => b.name === name))
    return `the name "${name}" would make spawn_${name}, the ${name} backend's own tool: choose another name`;
  return undefined;
}

/**
 * Checks one definition (frontmatter already parsed to a plain object, plus the body) and
 * returns it, or every problem found.
 */
export function checkDefinition(
  name: string,
  raw: unknown,
  body: string,
  where: { scope: AgentScope; file: string },
  ctx: AgentContext,
): { definition: AgentDefinition } | { problems: string[] } {
  const problems: string[] = [];
  const bad = nameProblem(name, ctx.backends);
  if (bad) problems.push(bad);
  const parsed = frontmatterSchema.safeParse(raw ?? {}, {
    error: (i) =>
      i.path?.[0] === 'backend' && i.input === undefined
        ? `is required: one of the backends (${ctx.backends.map((b) => b.name).join(', ')})`
        : undefined,
  });
  if (!parsed.success) return { problems: [...problems, ...parsed.error.issues.map(frontmatterIssue)] };
  const fm = parsed.data;
  if (fm.name !== undefined && fm.name !== name)
    problems.push(`name "${fm.name}" differs from the folder's name "${name}": the folder names the agent`);
  if (!fm.description.trim()) problems.push('description is empty: say when the orchestrator should use this agent');
  if (!body.trim()) problems.push('the system prompt (the text after the frontmatter) is empty');
  if (body.length > MAX_PROMPT_CHARS) problems.push(`the system prompt is longer than ${MAX_PROMPT_CHARS} characters`);

  const backend = ctx.backends.find((b) => b.name === fm.backend);
  if (!backend) {
    problems.push(`unknown backend "${fm.backend}" (known: ${ctx.backends.map((b) => b.name).join(', ')})`);
  } else problems.push(...backendProblems(fm, backend, body, ctx));
  if (fm.output_schema !== undefined) {
    const problem = schemaProblem(fm.output_schema, backend);
    if (problem) problems.push(`output_schema: ${problem}`);
  }
  if (where.scope === 'project') problems.push(...projectAgentProblems(fm, ctx.config.projectDir));
  if (problems.length) return { problems };
  return { definition: definitionOf(name, fm, body, where) };
}

/** One problem of the frontmatter's shape, as the user should read it. */
function frontmatterIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys')
    return `unknown setting${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')} (known: ${Object.keys(frontmatterSchema.shape).join(', ')})`;
  if (issue.code === 'invalid_key' && issue.path[0] === 'mcp_servers')
    return `mcp_servers: ${JSON.stringify(String(issue.path[1]))} is not a valid MCP server name (letters, digits, _ and - only)`;
  const key = issue.path.length ? issue.path.join('.') : 'frontmatter';
  return `${key}: ${issue.message}`;
}

/** The settings that `backend` cannot honour as written. */
function backendProblems(fm: Frontmatter, backend: Backend, body: string, ctx: AgentContext): string[] {
  const problems: string[] = [];
  if (ctx.config.backends[backend.name]?.enabled === false)
    problems.push(`backend ${backend.name} is disabled in this configuration`);
  if (fm.model !== undefined && ctx.models[backend.name]) {
    const model = resolveModel(ctx.models, backend.name, fm.model);
    if ('error' in model) problems.push(`model: ${model.error}`);
  }
  if (!backend.supportsSystemPrompt) problems.push(`backend ${backend.name} takes no system prompt`);
  else {
    const tooLarge = systemPromptProblem(body.trim(), backend);
    if (tooLarge) problems.push(`the system prompt is ${tooLarge}`);
  }
  if (fm.session && !backend.supportsResume)
    problems.push(`session: backend ${backend.name} cannot continue a conversation`);
  if (fm.session && fm.isolation === 'worktree')
    problems.push('isolation: a session agent keeps one conversation in one folder; worktrees are for one-off runs');
  if (backend.kind === 'api') {
    for (const key of [
      'permission',
      'allow',
      'deny',
      'mcp_servers',
      'allow_nesting',
      'ask_parent',
      'env',
      'isolation',
      'sandbox',
    ] as const) {
      if (fm[key] !== undefined && fm[key] !== false && fm[key] !== 'none')
        problems.push(`${key}: backend ${backend.name} is an HTTP API with no tools, so ${key} does not apply`);
    }
    return problems;
  }
  if (fm.permission !== undefined && !backend.permissionModes.includes(fm.permission)) {
    problems.push(
      `permission "${fm.permission}" is not one of ${backend.name}'s: ${backend.permissionModes.join(', ')}`,
    );
  }
  if ((fm.allow || fm.deny) && !backend.supportsToolLists)
    problems.push(`${backend.name} has no per-tool allow or deny lists: use permission instead`);
  if (fm.mcp_servers && !backend.supportsMcpServers) problems.push(`${backend.name} cannot be given MCP servers`);
  const serversProblem = fm.mcp_servers && backend.mcpServersProblem?.(fm.mcp_servers as Record<string, McpServerSpec>);
  if (serversProblem) problems.push(serversProblem);
  if (fm.mcp_servers?.[PARENT_SERVER])
    problems.push(
      `mcp_servers.${PARENT_SERVER}: the name is the channel to the orchestrator's (ask_parent): choose another`,
    );
  return problems;
}

/**
 * A project's definition came with the repository: it may not show its agent the rest of the
 * machine, nor hand it your secrets (a variable named like one is passed on by your own config or agents).
 */
function projectAgentProblems(fm: Frontmatter, projectDir: string): string[] {
  const problems: string[] = [];
  if (typeof fm.sandbox === 'object') {
    // The engine gets the CLI's login folder and environment: a repository may not name one.
    if (fm.sandbox.engine)
      problems.push(
        `sandbox.engine: a project's agent (it came with the repository) may not choose the container engine, which is given the CLI's login folder and environment: set it in your own config (backends.${fm.backend}.sandbox.engine) or a user agent`,
      );
    for (const mount of fm.sandbox.mounts ?? []) {
      if (mount.path.startsWith('~/') || !isInside(projectDir, mount.path))
        problems.push(
          `sandbox.mounts: ${mount.path} is outside the project, and a project's agent (it came with the repository) mounts only folders inside it: mount it in your own config (backends.${fm.backend}.sandbox.mounts) or a user agent`,
        );
    }
  }
  for (const variable of fm.env ?? []) {
    if (SECRET_NAME.test(variable))
      problems.push(
        `env: ${variable} is named like a secret, and a project's agent (it came with the repository) may not be given secrets: pass it in your own config (backends.${fm.backend}.env) or a user agent`,
      );
  }
  return problems;
}

/** The checked frontmatter and body as a definition. */
function definitionOf(
  name: string,
  fm: Frontmatter,
  body: string,
  where: { scope: AgentScope; file: string },
): AgentDefinition {
  return {
    name,
    description: fm.description.trim(),
    backend: fm.backend,
    model: fm.model,
    systemPrompt: body.trim(),
    timeoutS: fm.timeout_s,
    maxTurns: fm.max_turns,
    maxBudgetUsd: fm.max_budget_usd,
    permission: fm.permission,
    allow: fm.allow,
    deny: fm.deny,
    mcpServers: fm.mcp_servers as Record<string, McpServerSpec> | undefined,
    session: fm.session ?? false,
    allowedCallers: fm.allowed_callers,
    outputSchema: fm.output_schema,
    nesting: fm.allow_nesting === true ? 1 : typeof fm.allow_nesting === 'number' ? fm.allow_nesting : 0,
    askParent: fm.ask_parent === false ? false : undefined,
    env: fm.env?.length ? fm.env : undefined,
    isolation: fm.isolation,
    sandbox: fm.sandbox === undefined ? undefined : sandboxSettings(fm.sandbox),
    scope: where.scope,
    file: where.file,
  };
}

/** Splits an agent.md into its YAML frontmatter (parsed) and its body. */
export function parseAgentFile(text: string): { frontmatter: unknown; body: string } | { problem: string } {
  const clean = text.replace(/^\uFEFF/, '');
  const open = /^---[ \t]*\r?\n/.exec(clean);
  if (!open)
    return { problem: 'it does not start with a YAML frontmatter block (a line "---", the settings, then "---")' };
  const rest = clean.slice(open[0].length);
  const close = /^(?:---|\.\.\.)[ \t]*$/m.exec(rest);
  if (!close) return { problem: 'its frontmatter is not closed: add a line "---" after the settings' };
  const yamlText = rest.slice(0, close.index);
  const body = rest.slice(close.index + close[0].length).replace(/^\r?\n/, '');
  const doc = yaml().parseDocument(yamlText, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length)
    return { problem: `its frontmatter is not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}` };
  const frontmatter: unknown = doc.toJS({ maxAliasCount: 50 });
  if (
    frontmatter !== null &&
    frontmatter !== undefined &&
    (typeof frontmatter !== 'object' || Array.isArray(frontmatter))
  ) {
    return { problem: 'its frontmatter must be a mapping of settings (key: value lines)' };
  }
  return { frontmatter: frontmatter ?? {}, body };
}

/** An agent.md's text: the settings as YAML frontmatter, then the system prompt. */
export function renderAgentFile(frontmatter: Frontmatter, systemPrompt: string): string {
  const clean = Object.fromEntries(Object.entries(frontmatter).filter(([, v]) => v !== undefined));
  return `---\n${yaml().stringify(clean, { lineWidth: 0 })}---\n\n${systemPrompt.trim()}\n`;
}

/** Loads one agent.md. */
export function loadAgentFile(
  name: string,
  file: string,
  scope: AgentScope,
  ctx: AgentContext,
): { definition: AgentDefinition } | { problem: AgentProblem } {
  const problem = (text: string): { problem: AgentProblem } => ({ problem: { file, scope, name, problem: text } });
  let text: string;
  try {
    const stat = statSync(file);
    if (!stat.isFile()) return problem(`${AGENT_FILE} is not a file`);
    if (stat.size > MAX_FILE_BYTES) return problem(`it is larger than ${MAX_FILE_BYTES / 1024} KB`);
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return problem(
      code === 'ENOENT' ? `the folder has no ${AGENT_FILE}` : `it cannot be read (${code ?? (error as Error).message})`,
    );
  }
  const split = parseAgentFile(text);
  if ('problem' in split) return problem(split.problem);
  const checked = checkDefinition(name, split.frontmatter, split.body, { scope, file }, ctx);
  if ('problems' in checked) return problem(checked.problems.join('; '));
  return checked;
}

type AgentFolder = { scope: AgentScope; dir: string };

/** The project's folder (agents_dir, default `.polyspawn/agents/`), then the user's `<config>/agents/`. */
export function agentFolders(config: Config): AgentFolder[] {
  return [
    { scope: 'project', dir: config.agentsDir },
    { scope: 'user', dir: join(config.userConfigDir, 'agents') },
  ];
}

export type LoadedAgents = {
  /** The definitions in effect, by name, sorted by name. */
  agents: Map<string, AgentDefinition>;
  /** Valid user definitions hidden by a project definition of the same name. */
  shadowed: AgentDefinition[];
  problems: AgentProblem[];
};

/** What loadAgents keeps between loads: each agent.md's result, by path, with the file's stat when read. */
export type AgentFileCache = Map<string, { stamp: string; loaded: ReturnType<typeof loadAgentFile> }>;

function fileStamp(file: string): string | undefined {
  try {
    const s = statSync(file);
    return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch {
    return undefined;
  }
}

/**
 * Every agent folder's definitions: the project's first, then the user's where no project one has
 * the name. With a cache, only the files changed since the last load are read and checked again
 * (define_agent reloads after each file it writes).
 */
export function loadAgents(ctx: AgentContext, cache?: AgentFileCache): LoadedAgents {
  const found: AgentDefinition[] = [];
  const problems: AgentProblem[] = [];
  const seen = new Set<string>();
  const load = (name: string, file: string, scope: AgentScope) => {
    const stamp = cache && fileStamp(file);
    const hit = cache?.get(file);
    if (stamp && hit?.stamp === stamp) return hit.loaded;
    const loaded = loadAgentFile(name, file, scope, ctx);
    if (stamp) cache!.set(file, { stamp, loaded });
    return loaded;
  };
  for (const { scope, dir } of agentFolders(ctx.config)) {
    let entries: string[];
    try {
      entries = readdirSync(dir).sort();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR')
        problems.push({
          file: dir,
          scope,
          problem: `the agents folder cannot be read (${code ?? (error as Error).message})`,
        });
      continue;
    }
    for (const entry of entries) {
      if (entry.startsWith('.')) continue;
      const path = join(dir, entry);
      let isDir = false;
      try {
        isDir = statSync(path).isDirectory();
      } catch {
        continue; // gone since readdir, or a dangling link
      }
      if (!isDir) {
        if (entry.endsWith('.md')) {
          const name = entry.slice(0, -3);
          problems.push({
            file: path,
            scope,
            name,
            problem: `an agent is a folder: move this file to ${join(dir, name, AGENT_FILE)}`,
          });
        }
        continue;
      }
      const file = join(path, AGENT_FILE);
      seen.add(file);
      const loaded = load(entry, file, scope);
      if ('problem' in loaded) problems.push(loaded.problem);
      else found.push(loaded.definition);
    }
  }
  for (const file of cache?.keys() ?? []) if (!seen.has(file)) cache!.delete(file);
  const agents = new Map<string, AgentDefinition>();
  const shadowed: AgentDefinition[] = [];
  for (const definition of found) {
    if (agents.has(definition.name)) shadowed.push(definition);
    else if (agents.size < MAX_AGENTS) agents.set(definition.name, definition);
    else
      problems.push({
        file: definition.file,
        scope: definition.scope,
        name: definition.name,
        problem: `skipped: ${MAX_AGENTS} named agents are loaded already, the most polyspawn serves (the project folder's first, by name): remove agents you do not use`,
      });
  }
  return { agents: new Map([...agents].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))), shadowed, problems };
}

/** What an agent's jobs carry: its fixed settings, the backend's allow-list mode when it lists tools. */
export function namedAgentSettings(definition: AgentDefinition, backend: Backend): NamedAgentSettings {
  const permission =
    definition.permission ?? (definition.allow && backend.kind === 'cli' ? backend.allowListPermission : undefined);
  return {
    name: definition.name,
    session: definition.session || undefined,
    permission: permission || undefined,
    allowTools: definition.allow,
    denyTools: definition.deny,
    mcpServers: definition.mcpServers,
    nesting: definition.nesting || undefined,
    env: definition.env,
  };
}

/** The problems of the agent files for a configuration: what `polyspawn doctor` shows. */
export function agentProblems(ctx: AgentContext): AgentProblem[] {
  return loadAgents(ctx).problems;
}

/**
 * Whether the caller (an MCP client, by the name it gave in initialize) may use the agent. Checked
 * by the spawn use case for every door (src/jobs/spawn.ts): spawn_<name>, a team's member, a session
 * agent's turn, `polyspawn run`.
 */
/**
 * A named agent's permission and tool lists over the configured ones: its allow list replaces
 * the configured one, its deny list adds to it (a denial in the config always holds).
 */
export function agentSettings(settings: BackendSettings, agent: NamedAgentSettings | undefined): BackendSettings {
  if (!agent) return settings;
  return {
    ...settings,
    ...(agent.permission ? { permission: agent.permission } : {}),
    ...(agent.allowTools ? { allowTools: agent.allowTools } : {}),
    ...(agent.denyTools ? { denyTools: [...new Set([...settings.denyTools, ...agent.denyTools])] } : {}),
  };
}

export function callerAllowed(
  definition: Pick<AgentDefinition, 'allowedCallers'>,
  caller: string | undefined,
): boolean {
  if (!definition.allowedCallers) return true;
  const name = caller?.trim().toLowerCase();
  return name !== undefined && definition.allowedCallers.some((c) => c.trim().toLowerCase() === name);
}
