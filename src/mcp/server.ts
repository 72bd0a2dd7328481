// The MCP layer: a thin protocol surface over the app. The tools are declared objects
// (src/mcp/tools/registry.ts) served by one loop (tool-server.ts).
import { McpServer } from '@modelcontextprotocol/server';
import type { App } from '../app.js';
import type { Nesting } from '../jobs/agents/nesting.js';
import { DEFAULT_WAIT_S } from '../jobs/table.js';
import { registerJobNotifications, registerResources, type ResourceUpdates } from './resources.js';
import { lazyJsonSchemaValidator } from './lazy-validator.js';
import { serveTaskMethods, TASKS_EXTENSION } from './tasks.js';
import { serveTools } from './tool-server.js';
import { toolSources } from './tools/registry.js';
import { modelsText } from './tools/spawn.js';
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
    'A CLI agent may ask you a question (ask_parent): wait_for_agents returns at once with `questions`; answer with reply_subagent and it carries on. One marked to: "user" is theirs: ask them (a task shows it in their dialog). ask_parent: false on a spawn forbids it.',
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
 * One client's server over the app. `nesting` is how deep that client runs, when it is not the
 * app's own (an agent's connection to the shared server): what it decides is which tools and
 * instructions the client gets. Built per connection on stdio, per session for 2025 clients
 * over HTTP and per request for 2026 ones: what outlives it (jobs, teams, tasks) is the app's.
 * `resourceUpdates`: which resource notifications it sends itself (resources.ts).
 */
export function createServer(
  app: App,
  nesting: Nesting = app.nesting,
  resourceUpdates: ResourceUpdates = 'subscribed',
): McpServer {
  const server = new McpServer(
    { name: 'polyspawn', version: VERSION },
    {
      instructions: instructions(app, nesting),
      capabilities: {
        logging: {},
        // Only spawns and teams become tasks: where none may start, there are none.
        ...(nesting.canSpawn ? { extensions: { [TASKS_EXTENSION]: {} } } : {}),
      },
      jsonSchemaValidator: lazyJsonSchemaValidator(),
    },
  );
  // What this server added to the shared app, removed when it closes: a shared server opens one
  // server per client session over one app, and a closed session must leave no listener behind.
  const disposers = [
    serveTools(server, app, toolSources(app, nesting), nesting.canSpawn ? undefined : nesting.reason),
    registerResources(server, app, resourceUpdates),
    registerJobNotifications(server, app),
  ];
  if (nesting.canSpawn) serveTaskMethods(server.server, app);
  server.server.onclose = () => {
    for (const dispose of disposers.splice(0)) dispose();
  };
  // Definitions edited on disk update the spawn_<agent> tools (and the client hears list_changed).
  if (nesting.canSpawn) app.agents.watch();
  return server;
}
