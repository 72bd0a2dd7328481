// define_agent, remove_agent and list_agents: managing named agents from the orchestrator.
// define_agent checks everything a file on disk is checked for (src/jobs/agents/definitions.ts)
// before it writes, writes atomically (temp file + rename), and reloads at once, so the new
// spawn_<name> tool is there when it answers. scope "project" (the default) writes to the
// project's agents folder, "user" to the user's config folder.
import { existsSync, readdirSync, rmdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { tool } from './tool.js';
import { ISOLATION_MODES, timeoutSeconds } from '../../config/config.js';
import type { Backend } from '../../../backends/types.js';
import {
  AGENT_FILE,
  checkDefinition,
  loadAgentFile,
  MAX_AGENTS,
  nameProblem,
  renderAgentFile,
  type AgentDefinition,
  type AgentScope,
  callerAllowed,
  type Frontmatter,
} from '../../jobs/agents/definitions.js';
import { MAX_DEPTH } from '../../jobs/agents/nesting.js';
import { sandboxLabel } from '../../config/sandbox.js';
import type { App } from '../../app.js';
import { brief } from '../tool-list.js';

import { InputError } from '../../lib/errors.js';
import { linkOnTheWay, makeDirs, writeAtomic } from '../../lib/fs.js';

const scopeField = z.enum(['project', 'user']);

const agentViewSchema = z.object({
  name: z.string(),
  tool: z.string(),
  description: z.string(),
  backend: z.string(),
  model: z.string().optional(),
  scope: scopeField,
  file: z.string(),
  system_prompt: z.string(),
  timeout_s: z.number().optional(),
  permission: z.string().optional(),
  allow: z.array(z.string()).optional(),
  deny: z.array(z.string()).optional(),
  mcp_servers: z.array(z.string()).optional().describe('Names of the MCP servers it gets'),
  session: z.boolean(),
  session_id: z.string().optional().describe('The session its next call continues'),
  allowed_callers: z.array(z.string()).optional(),
  usable_by_this_client: z.boolean(),
  output_schema: z.record(z.string(), z.unknown()).optional(),
  allow_nesting: z.number().optional(),
  ask_parent: z.boolean().optional(),
  isolation: z.enum(ISOLATION_MODES).optional().describe('worktree: its runs work in a git worktree of their own'),
  sandbox: z.string().optional().describe('The sandbox its definition asks for (your config may keep a stricter one)'),
  shadows: z.string().optional().describe('A user definition of the same name that this project one hides'),
});

const problemSchema = z.object({
  file: z.string(),
  scope: scopeField,
  name: z.string().optional(),
  problem: z.string(),
});

function view(app: App, definition: AgentDefinition, client: string | undefined): z.infer<typeof agentViewSchema> {
  const shadows = app.agents.shadowed.find((d) => d.name === definition.name);
  const session = definition.session ? app.sessions.read(definition.name) : undefined;
  return {
    name: definition.name,
    tool: `spawn_${definition.name}`,
    description: definition.description,
    backend: definition.backend,
    model: definition.model,
    scope: definition.scope,
    file: definition.file,
    system_prompt: definition.systemPrompt,
    timeout_s: definition.timeoutS,
    permission: definition.permission,
    allow: definition.allow,
    deny: definition.deny,
    // Names only: a server's env or headers may hold a token.
    mcp_servers: definition.mcpServers && Object.keys(definition.mcpServers),
    session: definition.session,
    session_id: session && session.backend === definition.backend ? session.sessionId : undefined,
    allowed_callers: definition.allowedCallers,
    usable_by_this_client: callerAllowed(definition, client),
    output_schema: definition.outputSchema,
    allow_nesting: definition.nesting || undefined,
    ask_parent: definition.askParent,
    isolation: definition.isolation,
    sandbox: definition.sandbox && sandboxLabel(definition.sandbox),
    shadows: shadows?.file,
  };
}

function folderOf(app: App, scope: AgentScope): string {
  return app.agents.folders.find((f) => f.scope === scope)!.dir;
}

/**
 * Refuses a symbolic link on the way to an agent's file (a repository can ship one that leads
 * out of the project): checked from the project folder down for the project's agents (from the
 * agents folder down when it is configured outside the project), and from the agents folder
 * down for the user's.
 */
function refuseLinks(app: App, scope: AgentScope, file: string, what: string, fix: string): void {
  const link =
    (scope === 'project' ? linkOnTheWay(app.config.projectDir, file) : undefined) ??
    linkOnTheWay(folderOf(app, scope), file);
  if (link)
    throw new InputError(
      `${what}: ${link} is a symbolic link, and polyspawn neither writes nor deletes through links in an agents ` +
        `folder (they can lead out of it): ${fix}`,
    );
}

export const listAgentsTool = (app: App) =>
  tool({
    name: 'list_agents',
    title: 'List named agents',
    description: 'The named agents (spawn_<name> tools), their settings, and agent files skipped, with why.',
    input: z.object({}).strict(),
    output: z.object({
      agents: z.array(agentViewSchema),
      problems: z.array(problemSchema).describe('Agent files that were skipped, and why'),
      folders: z.object({ project: z.string(), user: z.string() }),
    }),
    annotations: { readOnlyHint: true, openWorldHint: false },
    handler: async (_args, call) => {
      const client = call.caller;
      return {
        agents: [...app.agents.agents.values()].map((d) => view(app, d, client)),
        problems: [...app.agents.problems],
        folders: { project: folderOf(app, 'project'), user: folderOf(app, 'user') },
      };
    },
  });

const mcpServerInput = z.union([
  z
    .object({
      command: z.string(),
      args: z.array(z.string()).optional(),
      env: z.record(z.string(), z.string()).optional(),
    })
    .strict(),
  z.object({ url: z.string(), headers: z.record(z.string(), z.string()).optional() }).strict(),
]);

// The compact tools/list (src/mcp/tool-list.ts) says less than the full list and the README: the
// briefs below. The server validates with the full schema, and checkDefinition names every
// problem (a wrong backend, permission mode or MCP server shape) in its error. The backends
// named are the app's (never a list written here).
function defineInput(backends: readonly Backend[]) {
  const names = backends.map((b) => b.name);
  const listed = names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names.at(-1)}` : (names[0] ?? '');
  const toolLists = backends.filter((b) => b.kind === 'cli' && b.supportsToolLists).map((b) => b.name);
  const which = toolLists.length ? ` (${toolLists.join(', ')})` : '';
  return z
    .object({
      name: brief(
        z
          .string()
          .min(1)
          .max(100)
          .describe('A lower-case letter, then lower-case letters, digits, _ and -; the tool becomes spawn_<name>'),
        '',
      ),
      description: brief(
        z.string().max(2000).describe('When the orchestrator should use this agent'),
        'When to use it',
      ),
      // The backends' names are in the server's instructions (spawn_<backend>), and a wrong one is refused naming them.
      backend: brief(z.string().describe(listed), ''),
      system_prompt: brief(z.string().max(200_000).describe("The agent's instructions (the body of its agent.md)"), ''),
      model: brief(
        z.string().max(200).optional().describe('Fixes the model (an alias or a name); unset, callers may choose one'),
        '',
      ),
      timeout_s: timeoutSeconds().optional(),
      permission: brief(z.string().optional().describe("One of the backend's permission modes"), ''),
      allow: brief(z.array(z.string()).optional().describe(`Tools it may use${which}`), { type: 'array' }),
      deny: brief(z.array(z.string()).optional().describe(`Tools it may not use${which}`), { type: 'array' }),
      mcp_servers: brief(
        z
          .record(z.string(), mcpServerInput)
          .optional()
          .describe('MCP servers to give it: {name: {command, args, env} | {url, headers}}'),
        {
          type: 'object',
          description: '{name: {command,args,env}|{url,headers}}',
        },
      ),
      session: brief(z.boolean().optional().describe('Continue its previous conversation on every call'), ''),
      allowed_callers: brief(
        z.array(z.string()).optional().describe('MCP client names (from their initialize) that may use it; unset: any'),
        { type: 'array' },
      ),
      output_schema: brief(
        z.record(z.string(), z.unknown()).optional().describe('A JSON Schema its answers must match'),
        '',
      ),
      allow_nesting: brief(
        z
          .union([z.boolean(), z.number().int().min(0).max(MAX_DEPTH)])
          .optional()
          .describe('Let the agent start agents of its own (true, or how many levels)'),
        '',
      ),
      ask_parent: brief(z.boolean().optional().describe('false: it cannot ask you questions mid-run'), ''),
      scope: brief(
        scopeField
          .optional()
          .describe(
            '"project" (default): the project\'s agents folder; "user": the user\'s config folder, for every project',
          ),
        '',
      ),
      replace: brief(
        z.boolean().optional().describe('Overwrite an existing definition of that name in that scope'),
        '',
      ),
    })
    .strict();
}

export const defineAgentTool = (app: App) =>
  tool({
    name: 'define_agent',
    spawning: true,
    title: 'Define a named agent',
    description:
      'Save a reusable agent (a backend with its own prompt, model and rules; session: true continues one conversation) as the tool spawn_<name>. replace: true changes one.',
    input: defineInput(app.agents.ctx.backends),
    output: z.object({
      name: z.string(),
      tool: z.string(),
      scope: scopeField,
      file: z.string(),
      replaced: z.boolean(),
      note: z.string().optional(),
    }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    handler: async (args) => {
      const { name, system_prompt, scope = 'project', replace = false, ...settings } = args;
      const dir = folderOf(app, scope);
      const file = join(dir, name, AGENT_FILE);
      const frontmatter: Frontmatter = { name, ...settings } as Frontmatter;
      // The same checks as a file on disk, before anything is written.
      const checked = checkDefinition(name, frontmatter, system_prompt, { scope, file }, app.agents.ctx);
      if ('problems' in checked) throw new InputError(`agent "${name}" not defined: ${checked.problems.join('; ')}`);
      refuseLinks(app, scope, file, `agent "${name}" not defined`, 'remove the link, or choose another name');
      if (!app.agents.agents.has(name) && app.agents.agents.size >= MAX_AGENTS)
        throw new InputError(
          `agent "${name}" not defined: there are ${MAX_AGENTS} named agents already, the most polyspawn serves: remove one with remove_agent first`,
        );
      const replaced = existsSync(file);
      if (replaced && !replace)
        throw new InputError(
          `agent "${name}" already exists in ${file}: pass replace: true to overwrite it, or choose another name`,
        );
      const text = renderAgentFile(frontmatter, system_prompt);
      try {
        makeDirs(dirname(file));
        writeAtomic(file, text);
      } catch (error) {
        throw new InputError(`could not write ${file}: ${(error as Error).message}`);
      }
      // What was written must load as what was checked.
      const loaded = loadAgentFile(name, file, scope, app.agents.ctx);
      if ('problem' in loaded) throw new InputError(`wrote ${file}, but it does not load: ${loaded.problem.problem}`);
      app.agents.reload();
      const inEffect = app.agents.agents.get(name);
      const note =
        inEffect && inEffect.file !== file
          ? `a ${inEffect.scope} definition of the same name (${inEffect.file}) takes precedence, so spawn_${name} runs that one`
          : checked.definition.session && replaced
            ? 'its existing session continues; call it with new_session: true to start over'
            : undefined;
      return { name, tool: `spawn_${name}`, scope, file, replaced, note };
    },
  });

export const removeAgentTool = (app: App) =>
  tool({
    name: 'remove_agent',
    spawning: true,
    title: 'Remove a named agent',
    description: 'Delete a named agent (its file and its session); its spawn_<name> tool goes away.',
    input: z
      .object({
        name: z.string().min(1).max(100),
        scope: brief(
          scopeField
            .optional()
            .describe("Which definition to delete; default: the one in effect (the project's, else the user's)"),
          '',
        ),
      })
      .strict(),
    output: z.object({
      name: z.string(),
      removed: z.string(),
      scope: scopeField,
      now_in_effect: z.string().optional(),
    }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    handler: async ({ name, scope }) => {
      const bad = nameProblem(name, app.agents.ctx.backends);
      if (bad) throw new InputError(bad);
      const candidates: AgentScope[] = scope ? [scope] : ['project', 'user'];
      const found = candidates
        .map((s) => ({ scope: s, file: join(folderOf(app, s), name, AGENT_FILE) }))
        .find((c) => existsSync(c.file));
      if (!found) {
        const elsewhere =
          scope &&
          (['project', 'user'] as const).find(
            (s) => s !== scope && existsSync(join(folderOf(app, s), name, AGENT_FILE)),
          );
        throw new InputError(
          `no agent "${name}" in the ${scope ? `${scope} folder` : 'project or user folders'}${elsewhere ? `; there is one in the ${elsewhere} folder: pass scope "${elsewhere}"` : ': call list_agents to see the names'}`,
        );
      }
      refuseLinks(app, found.scope, found.file, `agent "${name}" not removed`, 'remove the link yourself');
      try {
        rmSync(found.file);
        const folder = dirname(found.file);
        if (readdirSync(folder).length === 0) rmdirSync(folder);
      } catch (error) {
        throw new InputError(`could not remove ${found.file}: ${(error as Error).message}`);
      }
      app.sessions.reset(name);
      app.agents.reload();
      const now = app.agents.agents.get(name);
      return { name, removed: found.file, scope: found.scope, now_in_effect: now?.file };
    },
  });
