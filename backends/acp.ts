// Any agent that speaks the Agent Client Protocol (ACP: JSON-RPC over stdio), declared in the
// user's config (`acp_agents`, src/config/acp-agents.ts) rather than in a file here: the agent is
// described by data (its command, how it answers permission modes, how it reports usage), and this
// file turns that description into a CliBackend whose runs src/jobs/acp/ drives. The run's log is
// the protocol's message stream, one JSON line per message (AcpLogLine); parse() reads the answer,
// the session and the usage back from it, transcript() (./acp-transcript.ts) what a person reads.
import { z } from 'zod';
import type { BackendModels, CliBackend, Outcome, SandboxPaths, Usage } from './types.js';
import { asNumber, field, jsonLines } from './jsonl.js';
import { acpTranscript } from './acp-transcript.js';

/** What an answer to `session/request_permission` is, under a permission mode: chosen, refused, or the orchestrator's to decide. */
export const PERMISSION_ANSWERS = ['allow', 'deny', 'ask'] as const;
export type PermissionAnswer = (typeof PERMISSION_ANSWERS)[number];

/**
 * Where the agent reports its tokens: `per_turn`, this turn's in the prompt's response
 * (PromptResponse.usage); `cumulative`, the session's so far there, counted anew by a process
 * that loads it (measured with copilot): a run is one process and one prompt, so it is this run's
 * too; `meta_token_count`, this turn's total in `_meta.quota.token_count` of the response; `none`.
 */
export const USAGE_REPORTS = ['per_turn', 'cumulative', 'meta_token_count', 'none'] as const;
type UsageReport = (typeof USAGE_REPORTS)[number];

/** How it takes MCP servers in `session/new` (the channel to the orchestrator is one): over HTTP, only over stdio (no channel then), or not at all. */
export const MCP_TRANSPORTS = ['http', 'stdio', 'none'] as const;
type McpTransport = (typeof MCP_TRANSPORTS)[number];

/** An ACP agent as declared: everything its backend is made from. */
export type AcpAgent = {
  name: string;
  description: string;
  command: string;
  args: string[];
  /** Arguments that choose the model, `{model}` standing for it, added when a spawn names one; none: the agent's own model. */
  modelArgs?: string[];
  /** The session mode to run in (`session/set_mode`), where its default asks for no permission polyspawn could answer. */
  sessionMode?: string;
  /** The models table's entry (the model a spawn without one runs, aliases, prices); unset: the agent's own model. */
  models?: BackendModels;
  /** Variables it logs in with or needs, passed by name (secrets included). */
  env: string[];
  /** Permission mode → answer; the first mode is the default. */
  permissions: Record<string, PermissionAnswer>;
  usage: UsageReport;
  mcp: McpTransport;
  /** Whether it reports a running cost in USD (`usage_update.cost`): then max_budget_usd is followed from it. */
  reportsCost: boolean;
  /** Whether the client offers it `fs/read_text_file` and `fs/write_text_file` (confined to the job's folder). */
  fs: boolean;
  /** How long `initialize` and `session/new` may take. */
  startTimeoutS: number;
  installHint: string;
  /** What a preset knows of a vendor's CLI beyond the protocol (its keys' shapes, where it keeps its state). */
  secretPatterns?: readonly string[];
  removeEnv?: readonly string[];
  /** Variables the preset sets for its CLI, as the built-in backend does. */
  setEnv?: () => Record<string, string>;
  modelEndpointEnv?: readonly string[];
  sandboxPaths?: SandboxPaths;
};

export type AcpBackend = CliBackend & { acp: AcpAgent };

export const isAcp = (backend: CliBackend): backend is AcpBackend => 'acp' in backend;

/** A spawn's own answer to permission requests: it may make its agent's stricter, never looser. */
const spawnInput = {
  on_permission: z.enum(PERMISSION_ANSWERS).optional().describe('ask (you answer) or deny, for this run'),
};

/** The stricter of two answers: ask is stricter than allow, deny than both. */
const STRICTNESS: Record<PermissionAnswer, number> = { allow: 0, ask: 1, deny: 2 };

/** Whether `answer` lets the agent do more without asking than `than` does. */
export const looserThan = (answer: PermissionAnswer, than: PermissionAnswer) => STRICTNESS[answer] < STRICTNESS[than];

/** The job's answer to permission requests: its permission mode's, narrowed by the spawn's `on_permission`. */
export function acpPermission(
  backend: AcpBackend,
  mode: string,
  job: { extra: Record<string, unknown> },
): PermissionAnswer {
  const configured = backend.acp.permissions[mode] ?? 'deny';
  const asked = job.extra.on_permission as PermissionAnswer | undefined;
  return asked !== undefined && looserThan(configured, asked) ? asked : configured;
}

/** The model a spawn names when it names none: ACP has no stable way to choose one, so the agent's own. */
const AGENTS_OWN_MODEL = 'default';

export function acpBackend(agent: AcpAgent): AcpBackend {
  const modes = Object.keys(agent.permissions) as [string, ...string[]];
  return {
    name: agent.name,
    kind: 'cli',
    title: `${agent.name} (ACP agent)`,
    description: agent.description,
    secretPatterns: agent.secretPatterns ?? [],
    models: agent.models ?? { default: AGENTS_OWN_MODEL, aliases: {}, prices: {} },
    executable: agent.command,
    binEnv: `POLYSPAWN_${agent.name.toUpperCase()}_BIN`,
    installHint: agent.installHint,
    // Sent before the task in the prompt (src/jobs/acp/session.ts): ACP has no system prompt.
    supportsSystemPrompt: true,
    supportsResume: true,
    supportsToolLists: false,
    permissionModes: modes,
    supportsMcpServers: agent.mcp !== 'none',
    extraInput: spawnInput,
    loginEnv: agent.env,
    removeEnv: agent.removeEnv,
    modelEndpointEnv: agent.modelEndpointEnv ?? [],
    sandboxPaths: agent.sandboxPaths,
    // The cost it reports as it goes is followed by the session driver; turns always are.
    budgetFlags: agent.reportsCost ? ['cost'] : [],
    acp: agent,
    command: (input, settings) => ({
      file: settings.bin ?? agent.command,
      args: [
        ...agent.args,
        ...(agent.modelArgs && input.model !== AGENTS_OWN_MODEL
          ? agent.modelArgs.map((arg) => arg.replaceAll('{model}', input.model))
          : []),
      ],
      env: { ...Object.fromEntries((agent.removeEnv ?? []).map((name) => [name, undefined])), ...agent.setEnv?.() },
      stdin: '',
    }),
    parse: (result) => parseAcpLog(agent, result.stdout),
    liveTurn: isTurn,
    transcript: acpTranscript,
  };
}

/** One line of an ACP run's log: a message and who sent it, or what polyspawn says of the run. */
export type AcpLogLine =
  { from: 'client' | 'agent'; message: Record<string, unknown> } | { polyspawn: { error: string } | { note: string } };

/** A turn, for max_turns: the client's prompt, and each tool call the agent starts. */
function isTurn(line: Record<string, unknown>): boolean {
  const message = field(line, 'message');
  const method = field(message, 'method');
  if (line.from === 'client') return method === 'session/prompt';
  return (
    method === 'session/update' && field(field(field(message, 'params'), 'update'), 'sessionUpdate') === 'tool_call'
  );
}

/** The answer (the agent's message chunks since the last prompt), the session, the stop reason and usage, from the log. */
export function parseAcpLog(agent: Pick<AcpAgent, 'usage'>, log: string): Outcome {
  let text = '';
  let sessionId: string | undefined;
  let promptId: unknown;
  let response: Record<string, unknown> | undefined;
  let costUsd: number | undefined;
  let error: string | undefined;
  for (const line of jsonLines(log).records) {
    const said = field(line, 'polyspawn');
    if (said !== undefined) {
      error = (field(said, 'error') as string | undefined) ?? error;
      continue;
    }
    const message = field(line, 'message');
    const params = field(message, 'params');
    if (line.from === 'client' && field(message, 'method') === 'session/prompt') {
      [text, promptId, response] = ['', field(message, 'id'), undefined];
      sessionId = (field(params, 'sessionId') as string | undefined) ?? sessionId;
    } else if (line.from === 'agent' && promptId !== undefined && field(message, 'id') === promptId) {
      response = field(message, 'result') as Record<string, unknown> | undefined;
      const failed = field(message, 'error');
      if (failed) error ??= `the agent answered the prompt with an error: ${String(field(failed, 'message'))}`;
    } else if (line.from === 'agent' && field(message, 'method') === 'session/update') {
      const update = field(params, 'update');
      const kind = field(update, 'sessionUpdate');
      const content = field(update, 'content');
      if (kind === 'agent_message_chunk' && field(content, 'type') === 'text') text += String(field(content, 'text'));
      const cost = field(update, 'cost');
      if (kind === 'usage_update' && field(cost, 'currency') === 'USD') costUsd = asNumber(field(cost, 'amount'));
    }
  }
  const stopReason = field(response, 'stopReason');
  const usage = usageOf(agent.usage, response);
  const ok = !error && stopReason === 'end_turn';
  return {
    ok,
    text,
    ...(ok
      ? {}
      : { error: error ?? (stopReason ? `the agent stopped: ${String(stopReason)}` : 'the turn did not end') }),
    sessionId,
    ...(usage ? { usage } : {}),
    // The cost it reports is the session's, earlier runs included: the job table takes this run's share.
    ...(costUsd !== undefined ? { sessionCostUsd: costUsd } : {}),
    costSource: 'unknown' as const,
    raw: response,
  };
}

function usageOf(report: UsageReport, response: Record<string, unknown> | undefined): Usage | undefined {
  if (report === 'meta_token_count') {
    const count = field(field(field(response, '_meta'), 'quota'), 'token_count');
    if (count === undefined) return undefined;
    const input = asNumber(field(count, 'input_tokens'));
    return { inputTokens: input, outputTokens: asNumber(field(count, 'output_tokens')), cachedInputTokens: 0 };
  }
  const usage = field(response, 'usage');
  if (report === 'none' || usage === undefined) return undefined;
  return {
    inputTokens: asNumber(field(usage, 'inputTokens')) + asNumber(field(usage, 'cachedReadTokens')),
    outputTokens: asNumber(field(usage, 'outputTokens')),
    cachedInputTokens: asNumber(field(usage, 'cachedReadTokens')),
  };
}
