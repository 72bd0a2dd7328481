// The MCP layer: a thin protocol surface over the app. One register function per tool.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { App } from '../app.js';
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
import { registerRunTeamTool, teamOptionNames } from './tools/run-team.js';
import { VERSION } from '../lib/version.js';

export function instructions(app: App): string {
  const backends = app.backends.map((b) => {
    const a = app.availability(b);
    return `- spawn_${b.name}: ${a.usable ? 'usable' : `NOT usable here (${a.summary ?? a.detail})`}. model: ${modelsText(app.models[b.name]!)}`;
  });
  return [
    'polyspawn delegates tasks to other coding agents, which run in the background in parallel.',
    ...kinds(app),
    `spawn_<backend> returns an agent_id at once. wait_for_agents waits (up to ${DEFAULT_WAIT_S} s a call; call again while some are pending) and returns answers; result, list, logs and cancel manage agents.`,
    // Said once here rather than in each spawn tool's schema (tools/list is paid for per tool).
    'Each agent sees only the prompt you give it: make it self-contained. Every run is recorded for audit (IAC.md in the project, and the run store); secrets are redacted.',
    ...channelInstructions(app),
    budgetInstructions(app),
    `spawn options: model (a name or an alias), cwd (the folder a CLI agent works in${app.config.allowCwdOutsideProject ? '' : ', inside the project'}), system_prompt (extra system instructions), resume (an earlier agent_id or session_id: continues that conversation), timeout_s (stop after this many seconds; default ${app.config.timeoutS}), wait_s (wait up to this long and return the result if done), output_schema (a JSON Schema the answer must match: it is validated, retried once on a mismatch, and returned as \`structured\`).${app.config.allowCallerSandbox ? ' sandbox (CLI agents: none, bwrap, docker or podman): where the agent runs; a sandbox your config set cannot be turned off.' : ''}`,
    ...worktreeInstructions(app),
    'Backends:',
    ...backends,
    ...agentInstructions(app),
    ...teamInstructions(app),
    ...app.iac.problems.map((p) => `WARNING: ${p}`),
  ].join('\n');
}

/** What a spawn's budget does on each kind of backend, said once (the field is listed bare). */
function budgetInstructions(app: App): string {
  const names = (test: (b: App['backends'][number]) => boolean) =>
    app.backends
      .filter(test)
      .map((b) => b.name)
      .join(', ');
  const own = names((b) => (b.budgetFlags ?? []).length === 2);
  const followed = names((b) => b.kind === 'cli' && (b.budgetFlags ?? []).length < 2);
  return [
    "budget: {max_turns, max_budget_usd} on a spawn caps the model requests and the USD one agent may spend (a named agent's own budget is a ceiling you may lower). An agent stopped at its budget ends failed, and its result's budget says exceeded.",
    own && `${own}: the CLI stops itself at it.`,
    followed &&
      `${followed}: polyspawn stops the run as a turn past max_turns begins; their cost is known only at the end (reported, not stopped).`,
    'API agents make one request: their cost is checked after it.',
  ]
    .filter(Boolean)
    .join(' ');
}

/** How agents reach back, said once: the channel's tools are the agents', reply_subagent is the orchestrator's. */
function channelInstructions(app: App): string[] {
  if (!app.parentChannel || !app.nesting.canSpawn) return [];
  return [
    'A running CLI agent can ask you a question (ask_parent): wait_for_agents then returns at once with `questions`, and list and result show them; answer each with reply_subagent(agent_id, message_id, answer) and the agent carries on in the same run. ask_parent: false on a spawn turns this off for that agent. API agents make one request and cannot ask.',
  ];
}

/** isolation and integrate, said once for every CLI spawn tool. */
function worktreeInstructions(app: App): string[] {
  if (!app.nesting.canSpawn || !app.backends.some((b) => b.kind === 'cli')) return [];
  return [
    `isolation (CLI agents; default "${app.config.isolation}"): "worktree" runs the agent in a git worktree of its own, on a new branch polyspawn/<agent_id> from HEAD (or base: a branch, tag or commit), so parallel agents never touch your checkout or each other; what it leaves uncommitted is committed on its branch when it ends. Its result's \`worktree\` lists the files it changed and \`overlaps\` (files that agents running at the same time changed too). Resuming it continues in the same worktree. integrate(agent_id, how) then merges the branch into your current branch or cherry-picks it (refused while your tracked files have uncommitted changes; on a conflict nothing is changed and the files are named), returns the patch, or discards it. A worktree with no changes is removed when its agent ends.`,
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

/** The six topologies of run_team, said once here (tools/list is paid for per tool). */
function teamInstructions(app: App): string[] {
  if (!app.nesting.canSpawn) return [];
  return [
    'run_team(topology, members, task, options) runs one task with several agents (members: backends or named agents, "<name>:<model>" for a model); its team_id works with wait_for_agents, result, cancel and list. Topologies: ' +
      'map_reduce (every member gets the task, or one of options.items each; options.reduce_with writes the answer from all of them), ' +
      'pipeline (stages in order, each given the previous answer; options.on_failure "continue" passes over a failed stage), ' +
      'peer_ring (a debate of options.rounds rounds, default 2; options.judge gives the verdict), ' +
      'leader_teammate (CLI members: the first leads and writes tasks on a shared list, the others take them), ' +
      'blackboard (CLI members share a key/value board in rounds until one writes "done"), ' +
      'supervisor_tree (one CLI supervisor that may run a team of its own). ' +
      `options: ${teamOptionNames.join(', ')}; max_budget_usd: no member starts once the team has spent it; max_turns and timeout_s apply to each member. team: a preset in .polyspawn/teams/<name>.md.`,
  ];
}

/** Named agents, and why a nested polyspawn starts none. */
function agentInstructions(app: App): string[] {
  if (!app.nesting.canSpawn) {
    return [
      `This polyspawn serves no spawn tools: ${app.nesting.reason}. Its other tools (list, result, wait_for_agents, logs, cancel, list_agents) still answer.`,
    ];
  }
  const agents = [...app.agents.agents.values()].map(
    (d) => `- spawn_${d.name}: ${d.description.split('\n')[0]!.slice(0, 160)}`,
  );
  return [
    'Named agents (presets over a backend: their own system prompt, model and rules; define_agent, remove_agent and list_agents manage them):',
    ...(agents.length ? agents : ['- none yet']),
  ];
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

export function createServer(app: App): McpServer {
  const server = new McpServer(
    { name: 'polyspawn', version: VERSION },
    // Nested without an allowance, tools/call is set up after refuseSpawnCalls (below) can wrap it.
    {
      instructions: instructions(app),
      capabilities: { ...(app.nesting.canSpawn ? { tools: {} } : {}), logging: {} },
      jsonSchemaValidator: lazyJsonSchemaValidator(),
    },
  );
  // What this server added to the shared app, removed when it closes: a shared server opens one
  // server per client session over one app, and a closed session must leave no listener behind.
  const disposers: (() => void)[] = [];
  if (app.nesting.canSpawn) {
    registerSpawnTools(server, app);
    disposers.push(registerAgentSpawnTools(server, app));
    registerRunTeamTool(server, app);
    registerDefineAgentTool(server, app);
    registerRemoveAgentTool(server, app);
    registerIntegrateTool(server, app);
    if (app.parentChannel) registerReplyTool(server, app);
  } else {
    refuseSpawnCalls(server, app.nesting.reason!);
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
  if (app.nesting.canSpawn) app.agents.watch();
  return server;
}
