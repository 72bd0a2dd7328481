// The MCP layer: a thin protocol surface over the app. One register function per tool.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { App } from '../app.js';
import type { Nesting } from '../jobs/agents/nesting.js';
import { DEFAULT_WAIT_S } from '../jobs/table.js';
import { registerAgentSpawnTools } from './tools/agent-spawn.js';
import { registerDefineAgentTool, registerListAgentsTool, registerRemoveAgentTool } from './tools/agents.js';
import { registerJobNotifications, registerResources } from './resources.js';
import { lazyJsonSchemaValidator } from './lazy-validator.js';
import { compactToolList } from './tool-list.js';
import { registerCancelTool } from './tools/cancel.js';
import { registerIntegrateTool } from './tools/integrate.js';
import { registerListTool } from './tools/list.js';
import { registerLogsTool } from './tools/logs.js';
import { registerReplyTool } from './tools/reply.js';
import { registerResultTool } from './tools/result.js';
import { modelsText, registerSpawnTools } from './tools/spawn.js';
import { registerWaitTool } from './tools/wait.js';
import { registerRunTeamTool } from './tools/run-team.js';
import { VERSION } from '../lib/version.js';

// The instructions: what spans tools (the workflow, the shared spawn options, questions,
// worktrees, teams, the record) and which backends can run here. Each tool's own details are in
// its description and schema. A model's client reads these once a session, like tools/list
// (budget: 2,500 B, test/unit/tool-list.test.ts).
export function instructions(app: App, nesting: Nesting = app.nesting): string {
  return [
    'polyspawn runs coding agents of other vendors for you, in the background and in parallel.',
    ...kinds(app),
    `Workflow: spawn_<agent> returns an agent_id at once; wait_for_agents returns the answers (up to ${DEFAULT_WAIT_S} s a call: call again while some are pending); result reads one without waiting; list, logs and cancel manage agents. An agent sees only its prompt: make it self-contained.`,
    ...spawnOptions(app, nesting),
    ...channelInstructions(app, nesting),
    ...worktreeInstructions(app, nesting),
    ...teamInstructions(app, nesting),
    ...agentInstructions(app, nesting),
    'Every run is recorded in IAC.md in the project (and the run store); secrets are redacted.',
    ...backendLines(app),
    ...app.iac.problems.map((p) => `WARNING: ${p}`),
  ].join('\n');
}

/** Which backends can run here, their models, and for the others what is missing (a spawn's error says how to fix it). */
function backendLines(app: App): string[] {
  return [
    'Backends:',
    ...app.backends.map((b) => {
      const a = app.availability(b);
      return a.usable
        ? `- spawn_${b.name}: usable. model: ${modelsText(app.models[b.name]!)}`
        : `- spawn_${b.name}: NOT usable here (${a.summary ?? a.detail})`;
    }),
  ];
}

/** The options every spawn tool shares, said once (the compact list leaves them undescribed). */
function spawnOptions(app: App, nesting: Nesting): string[] {
  if (!nesting.canSpawn) return [];
  const cwd = app.config.allowCwdOutsideProject ? "a CLI agent's folder" : "a CLI agent's folder, inside the project";
  const sandbox = app.config.allowCallerSandbox
    ? ' sandbox (CLI agents): none, bwrap, docker or podman; a sandbox your config set stays on.'
    : '';
  return [
    `spawn options: model (a name or alias), cwd (${cwd}), system_prompt, resume (an agent_id or session_id to continue), timeout_s (default ${app.config.timeoutS}), wait_s (wait this long for the result), output_schema (a JSON Schema the answer must match; returned as \`structured\`), budget {max_turns, max_budget_usd} (an agent past it ends failed; a named agent's budget is a ceiling).${sandbox}`,
  ];
}

/** How agents reach back, said once: the channel's tools are the agents', reply_subagent is the orchestrator's. */
function channelInstructions(app: App, nesting: Nesting): string[] {
  if (!app.parentChannel || !nesting.canSpawn) return [];
  return [
    'A CLI agent may ask you a question (ask_parent): wait_for_agents returns at once with `questions`; answer with reply_subagent and it carries on. ask_parent: false on a spawn forbids it.',
  ];
}

/** isolation, said once for every CLI spawn tool; integrate's description says the rest. */
function worktreeInstructions(app: App, nesting: Nesting): string[] {
  if (!nesting.canSpawn || !app.backends.some((b) => b.kind === 'cli')) return [];
  return [
    `isolation: "worktree" (CLI agents; default "${app.config.isolation}") gives an agent its own git worktree on branch polyspawn/<agent_id> (from base, default HEAD), so parallel agents never touch your checkout; its result lists the files changed and overlaps with other agents; then integrate.`,
  ];
}

/** What each kind of backend can do, said once for all their tools. */
function kinds(app: App): string[] {
  const of = (kind: 'cli' | 'api') =>
    app.backends
      .filter((b) => b.kind === kind)
      .map((b) => `spawn_${b.name}`)
      .join(', ');
  const said = [
    ...(of('cli')
      ? [`CLI agents (${of('cli')}) work in a folder: they read, edit and create files and run commands`]
      : []),
    ...(of('api') ? [`API agents (${of('api')}) answer from the prompt alone: paste in what they need`] : []),
  ];
  return said.length ? [`${said.join('; ')}.`] : [];
}

/** Teams in one line: run_team's schema says what each topology does. */
function teamInstructions(app: App, nesting: Nesting): string[] {
  if (!nesting.canSpawn) return [];
  return [
    'Teams: run_team runs one task with several agents in a topology; its team_id works with wait_for_agents, result, cancel and list.',
  ];
}

/** Named agents (their spawn_<name> tools describe themselves), and why a nested polyspawn starts none. */
function agentInstructions(app: App, nesting: Nesting): string[] {
  if (!nesting.canSpawn) {
    return [
      `This polyspawn serves no spawn tools: ${nesting.reason}. Its other tools (list, result, wait_for_agents, logs, cancel, list_agents) still answer.`,
    ];
  }
  return ['Named agents: define_agent saves a preset (prompt, model, rules) as the tool spawn_<name>.'];
}

/**
 * At a depth that may not start agents, no spawn tool is registered; a spawn_* call made anyway
 * gets a refusal that says why, rather than the SDK's "tool not found". Wraps the tools/call
 * handler the SDK installs (so call before registering any tool, on a server created without
 * the tools capability: the SDK then installs its handlers with the first tool).
 */
function refuseSpawnCalls(server: McpServer, reason: string): void {
  const inner = server.server;
  const original = inner.setRequestHandler.bind(inner) as (
    schema: unknown,
    handler: (request: never, extra: never) => unknown,
  ) => void;
  inner.setRequestHandler = ((
    schema: unknown,
    handler: (request: { params: { name: string } }, extra: unknown) => unknown,
  ) => {
    if (schema !== CallToolRequestSchema) return original(schema, handler as never);
    return original(schema, ((request: { params: { name: string } }, extra: unknown) => {
      const name = request.params.name;
      if (name.startsWith('spawn_'))
        return {
          isError: true,
          content: [{ type: 'text', text: `${name} refused: this polyspawn starts no agents, because ${reason}.` }],
        };
      return handler(request, extra);
    }) as never);
  }) as typeof inner.setRequestHandler;
}

/**
 * One client's server over the app. `nesting` is how deep that client runs, when it is not the
 * app's own (an agent's connection to the shared server): what it decides is which tools and
 * instructions the client gets.
 */
export function createServer(app: App, nesting: Nesting = app.nesting): McpServer {
  const server = new McpServer(
    { name: 'polyspawn', version: VERSION },
    // Nested without an allowance, tools/call is set up after refuseSpawnCalls (below) can wrap it.
    {
      instructions: instructions(app, nesting),
      capabilities: { ...(nesting.canSpawn ? { tools: {} } : {}), logging: {} },
      jsonSchemaValidator: lazyJsonSchemaValidator(),
    },
  );
  // What this server added to the shared app, removed when it closes: a shared server opens one
  // server per client session over one app, and a closed session must leave no listener behind.
  const disposers: (() => void)[] = [];
  if (nesting.canSpawn) {
    registerSpawnTools(server, app);
    disposers.push(registerAgentSpawnTools(server, app));
    registerRunTeamTool(server, app);
    registerDefineAgentTool(server, app);
    registerRemoveAgentTool(server, app);
    registerIntegrateTool(server, app);
    if (app.parentChannel) registerReplyTool(server, app);
  } else {
    refuseSpawnCalls(server, nesting.reason!);
  }
  registerListAgentsTool(server, app);
  registerListTool(server, app);
  registerResultTool(server, app);
  registerWaitTool(server, app);
  registerCancelTool(server, app);
  registerLogsTool(server, app);
  disposers.push(registerResources(server, app), registerJobNotifications(server, app));
  server.server.onclose = () => {
    for (const dispose of disposers.splice(0)) dispose();
  };
  compactToolList(server, app.env);
  // Definitions edited on disk update the spawn_<agent> tools (and the client hears list_changed).
  if (nesting.canSpawn) app.agents.watch();
  return server;
}
