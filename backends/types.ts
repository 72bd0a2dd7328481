// The backend contract (docs/ARCHITECTURE.md, "Adding a backend"). Backends know nothing of MCP:
// the registry hands these objects to src/, which turns each into a `spawn_<name>` tool.
import type { z } from 'zod';

export type Usage = {
  /** All input tokens, cached ones included. */
  inputTokens: number;
  outputTokens: number;
  /** The part of inputTokens served from a prompt cache. */
  cachedInputTokens: number;
};

export type CostSource = 'reported' | 'estimated' | 'unknown';

/** What one run of a backend produced. Parsers fill what they can; the job table adds timing. */
export type Outcome = {
  ok: boolean;
  text: string;
  error?: string;
  sessionId?: string;
  usage?: Usage;
  costUsd?: number;
  costSource: CostSource;
  /**
   * The CLI's running totals for the whole session, where it reports those instead of this
   * run's (codex, copilot): the job table subtracts the previous turn's to get `usage`.
   */
  sessionTotals?: Usage;
  /**
   * The session's cost so far in USD, where the agent reports a running cost over the whole
   * session, earlier runs of it included (an ACP agent's usage_update.cost, after a session/load
   * too): the job table subtracts the previous turn's to get `costUsd`.
   */
  sessionCostUsd?: number;
  /**
   * `usage` split by the model that spent it, where one run uses several (Gemini CLI's router
   * on a small model, then the model it picked): cost is estimated per model from the models table.
   */
  usageByModel?: Record<string, Usage>;
  /** Copilot bills in premium requests, not USD. */
  premiumRequests?: number;
  /** The backend's own final record (claude's result object, codex's last events, ...). */
  raw?: unknown;
  /** A structured answer the CLI reported apart from its text (claude's `structured_output`). */
  structuredOutput?: unknown;
  /** The answer as a JSON value, validated by the server against the job's output schema. */
  structured?: unknown;
  /** The job's budget it passed (Budget): the CLI stopped for it, or polyspawn did, or saw it once the run ended. */
  budgetExceeded?: BudgetKind;
};

/** A job's limits: `turns` (model requests, max_turns) and `cost` (USD, max_budget_usd). */
export type BudgetKind = 'turns' | 'cost';

export type Budget = { maxTurns?: number; maxBudgetUsd?: number };

type ModelPrice = {
  /** USD per million tokens. */
  input: number;
  output: number;
  cachedInput?: number;
};

export type BackendModels = {
  default: string;
  aliases: Record<string, string>;
  prices: Record<string, ModelPrice>;
};

/** The input every spawn tool takes; backends declare which optional parts they support. */
export type SpawnInput = {
  prompt: string;
  /** Resolved model name (aliases already applied). */
  model: string;
  cwd: string;
  systemPrompt?: string;
  /** A session id to continue. */
  resumeSessionId?: string;
  /** A JSON Schema the answer must match: CLIs with a native flag get it (the server validates anyway). */
  outputSchema?: Record<string, unknown>;
  /** MCP servers to give the agent (from an agent definition), by name. */
  mcpServers?: Record<string, McpServerSpec>;
  /** The job's budget: a backend passes on to its CLI the kinds in its `budgetFlags`. */
  budget?: Budget;
  /** Backend-specific extra fields, already validated by the backend's own schema. */
  extra: Record<string, unknown>;
};

/** One MCP server for an agent: a command it starts (stdio), or a URL (streamable HTTP). */
export type McpServerSpec =
  | { command: string; args?: string[]; env?: Record<string, string> }
  | { url: string; headers?: Record<string, string> };

export type BackendSettings = {
  /** Permission mode, one of the backend's `permissionModes`. */
  permission: string;
  /** Tool allow/deny lists, mapped to each CLI's own flags. */
  allowTools: string[];
  denyTools: string[];
  /** The executable, when not found on PATH under its usual name. */
  bin?: string;
};

type CommandSpec = {
  file: string;
  args: string[];
  /** Variables to set (string) or remove (undefined) in the child's environment. */
  env: Record<string, string | undefined>;
  stdin: string;
  /**
   * Files to write before the CLI starts (path: content), e.g. an instructions file: written
   * readable by the user alone, and removed when the run ends (one may hold a token).
   */
  files?: Record<string, string>;
  /** Files the CLI writes besides stdout, read after exit and handed to parse(). */
  artifacts?: Record<string, string>;
};

export type CliResult = {
  stdout: string;
  stderr: string;
  exitCode: number | null;
  /** True when the runner kept only the head and tail of a very long stdout. */
  stdoutTruncated: boolean;
  artifacts: Record<string, string | undefined>;
};

type BackendBase = {
  name: string;
  title: string;
  /** When an orchestrating model should pick this backend. */
  description: string;
  /**
   * Shapes of this vendor's keys and tokens, as regular expression sources (ASCII only, so they
   * match in byte text too): redacted wherever they appear, configured or not. Empty when its
   * keys have no recognizable shape (only their configured values are redacted then).
   */
  secretPatterns: readonly string[];
  /**
   * The shipped models table's entry: the model a spawn without one runs, short names for
   * models, and prices (USD per million tokens) for where the run reports no cost. The user's
   * and the project's models.json override parts of it (docs/configuration.md, "Models").
   */
  models: BackendModels;
  /** Whether the CLI accepts a system prompt (tools hide the field where it does not). */
  supportsSystemPrompt: boolean;
  supportsResume: boolean;
  /** Extra tool input fields beyond the common ones. */
  extraInput?: z.ZodRawShape;
  /**
   * The largest output schema (JSON text, in UTF-8 bytes) it can be given, where it takes the
   * schema as a command-line argument (Linux caps one at 128 KiB); unset: only the server's own cap.
   */
  maxOutputSchemaBytes?: number;
  /**
   * The largest system prompt (as a JSON string, in UTF-8 bytes), where it takes the prompt as a
   * command-line argument; unset: it reads it from a file, or over HTTP, and only the tools' cap holds.
   */
  maxSystemPromptBytes?: number;
  /**
   * The budgets it enforces itself, given SpawnInput.budget (a CLI's flags); polyspawn follows
   * the others from what the run reports (CliBackend.liveTurn, the outcome's cost).
   */
  budgetFlags?: readonly BudgetKind[];
};

export type CliBackend = BackendBase & {
  kind: 'cli';
  /** The executable name looked up on PATH, and the variable that overrides it. */
  executable: string;
  binEnv: string;
  installHint: string;
  /** Allowed values of BackendSettings.permission; the first is the default. */
  permissionModes: readonly [string, ...string[]];
  /** Whether BackendSettings.allowTools/denyTools map to flags of this CLI. */
  supportsToolLists: boolean;
  /**
   * The permission mode under which an allow list is what decides (the default modes allow
   * everything); an agent definition with `allow` and no `permission` runs in it.
   */
  allowListPermission?: string;
  /**
   * Whether the CLI can be given MCP servers for one run (agent definitions' mcp_servers, and
   * the channel to the orchestrator, CommandContext.parent).
   */
  supportsMcpServers?: boolean;
  /** Why an agent cannot be given these MCP servers together, or undefined (checked where agents are defined). */
  mcpServersProblem?(servers: Readonly<Record<string, McpServerSpec>>): string | undefined;
  /**
   * The environment variables the CLI logs in with (keys, tokens, its own config folder): the
   * only variables whose names mark a secret that its child gets unless passed on by name, and
   * what a client that starts polyspawn with a cleared environment must pass on (Codex's env_vars).
   */
  loginEnv: readonly string[];
  /**
   * Variables removed from the CLI's environment wherever polyspawn starts it (command() and
   * doctor's --version check), e.g. a marker that makes the CLI refuse to run nested.
   */
  removeEnv?: readonly string[];
  /**
   * How `polyspawn doctor` asks the CLI whether it is signed in, with a command that sends no
   * model request: its arguments, and its answer read (undefined: the answer does not tell).
   * Unset: the CLI has no such command, and doctor says the sign-in was not checked.
   */
  signInCheck?: {
    args: readonly string[];
    read(answer: { exitCode: number | null; stdout: string; stderr: string }, env: Environment): SignIn | undefined;
  };
  /** What a sandbox must bind for this CLI to run (src/jobs/process/sandbox.ts); unset: nothing of its own. */
  sandboxPaths?: SandboxPaths;
  /**
   * The variables that point the CLI at another model API (a base URL). A sandbox without network
   * runs it only when one of them names a loopback address: without one the CLI cannot reach its
   * vendor, and some wait for the network until their time-out.
   */
  modelEndpointEnv: readonly string[];
  command(input: SpawnInput, settings: BackendSettings, ctx: CommandContext): CommandSpec;
  parse(result: CliResult): Outcome;
  /**
   * Whether one JSON line of its stdout, as it is written, begins a model request (a turn): how
   * polyspawn stops a run mid-way that passes a max_turns the CLI does not enforce itself. (No
   * CLI here reports its tokens before the end, so a cost budget is checked once the run ends.)
   */
  liveTurn?(record: Record<string, unknown>): boolean;
  /**
   * The transcript entries one JSON line of its stdout holds (none for the lines that are only
   * bookkeeping): how the dashboard shows a run as messages, commands, edits and plans. Unset:
   * the dashboard shows the raw output.
   */
  transcript?(record: Record<string, unknown>): TranscriptEntry[];
};

/** A CLI's sign-in as its status command tells it: how it is signed in (a few words), or what to do. */
type SignIn = { signedIn: true; how?: string } | { signedIn: false; fix: string };
/**
 * One step of a run as a person reads it (the dashboard's transcript), in no vendor's shape: a
 * CLI backend's `transcript()` turns each line of its stdout into these. A step that a later
 * line completes (a command and its exit code, a tool and its result) has an `id`: a later
 * entry with the same id replaces it, and a `done` entry adds its outcome to it.
 */
export type TranscriptEntry =
  /** `continues`: a piece of a message streamed in chunks, joined to the step just before when that is one of its kind. */
  | { kind: 'message'; text: string; continues?: true }
  | { kind: 'reasoning'; text: string; continues?: true }
  | { kind: 'command'; id?: string; command: string; status: StepStatus; exitCode?: number; output?: string }
  | {
      kind: 'edit';
      id?: string;
      path: string;
      /** write: the whole file written, new or not. */
      change: 'add' | 'update' | 'delete' | 'write';
      status: StepStatus;
      /** The text replaced and its replacement (a whole new file: `after` alone), when the CLI says them. */
      before?: string;
      after?: string;
      /** A unified diff, when the CLI gives one instead. */
      diff?: string;
    }
  | { kind: 'tool'; id?: string; name: string; server?: string; input?: string; status: StepStatus; output?: string }
  | { kind: 'plan'; items: { text: string; status: 'pending' | 'in_progress' | 'completed' }[] }
  /** A retry or warning the run went on after. */
  | { kind: 'notice'; text: string }
  | { kind: 'error'; text: string }
  | { kind: 'done'; id: string; status: Exclude<StepStatus, 'running'>; exitCode?: number; output?: string };

export type StepStatus = 'running' | 'ok' | 'failed';

/** Where a CLI keeps what it needs, for a sandbox that hides the rest of the machine. */
export type SandboxPaths = {
  /**
   * Its own config and login folders and files, where this environment puts them (its variables
   * move them): bound read-write for this backend alone. A folder missing is created, a file missing skipped.
   */
  state(env: Environment, home: string): { dirs: string[]; files: string[] };
  /** Its installation, from its executable's real path (a folder, or the file alone): bound read-only. */
  install(realExecutable: string): string;
};

/** Environment variables, as the child process or the API call sees them. */
export type Environment = Readonly<Record<string, string | undefined>>;

/**
 * The orchestrator's MCP server for one run (ask_parent, check_message_status, report_progress),
 * over Streamable HTTP on 127.0.0.1: the backend adds it to the CLI's MCP servers for this run
 * and lets its tools run without a permission prompt.
 */
export type ParentEndpoint = {
  /** The server's name as the agent sees it (its tools: mcp__<name>__ask_parent and so on). */
  name: string;
  url: string;
  /** The run's bearer token. Never in argv, nor in a file: the CLI reads it from `tokenEnv`. */
  token: string;
  /** The variable the executor sets to the token in the child's environment. */
  tokenEnv: string;
  /** The longest one tool call blocks, in seconds: a CLI's tool time-out must exceed it. */
  toolCallS: number;
};

/** What the CLI executor hands a CLI backend's command(). */
export type CommandContext = {
  /** A folder of the run's own, for the files the command writes or reads. */
  scratchDir: string;
  /** The environment the child starts from, before the spec's own changes; none when absent. */
  env?: Environment;
  /** The channel to the orchestrator, when the run has one (only where supportsMcpServers). */
  parent?: ParentEndpoint;
};

/** What the API executor hands an API backend's call(). */
export type ApiCallContext = {
  signal: AbortSignal;
  /** The environment the call runs in (polyspawn's own); none when absent. */
  env?: Environment;
  key: string;
  baseUrl?: string;
  /** Per-attempt timeout and whole-call deadline (the job's timeout_s). */
  timeoutMs?: number;
  policy?: Partial<{ maxAttempts: number; retryAfterCapMs: number; backoffMs: number }>;
  /** Named in messages: where the key came from, how to change the base URL. Never values. */
  hints?: { key?: string; baseUrl?: string };
  /** One line per attempt and wait, for the run's log. */
  log?: (line: string) => void;
};

export type ApiBackend = BackendBase & {
  kind: 'api';
  /** The names its key goes by, in api_keys.json and the environment, in the order tried. */
  keyNames: readonly string[];
  /** What its key is called when someone is asked for it (VS Code's password prompt), e.g. "Acme API key". */
  keyLabel: string;
  /** The endpoint call() uses when no base URL is configured (doctor shows it). */
  defaultBaseUrl: string;
  call(input: SpawnInput, ctx: ApiCallContext): Promise<Outcome>;
};

export type Backend = CliBackend | ApiBackend;
