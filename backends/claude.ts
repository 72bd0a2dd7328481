// Claude Code: `claude -p`, prompt on stdin, stream-json so the log shows progress while it runs.
import type { BudgetKind, CliBackend, McpServerSpec, TranscriptEntry } from './types.js';
import { join } from 'node:path';
import { npmInstall } from './sandbox-paths.js';
import { argumentsText, asNumber, asString, contentText, field, jsonLines, missingResult } from './jsonl.js';
import { bearerFromEnv, mapValues } from './mcp-servers.js';

/**
 * This run's cost. total_cost_usd adds up over a resumed session; stream-json's
 * model_usage_since_last_result holds this run's share, per model.
 */
function runCost(result: Record<string, unknown>): number | undefined {
  const sinceLast = field(result, 'model_usage_since_last_result');
  if (sinceLast && typeof sinceLast === 'object') {
    return Object.values(sinceLast).reduce((sum: number, model) => sum + asNumber(field(model, 'costUSD')), 0);
  }
  const total = field(result, 'total_cost_usd');
  return typeof total === 'number' ? total : undefined;
}

/**
 * The result subtypes of a run claude ended at a budget; its `errors` say the limit, e.g.
 * "Reached maximum number of turns (3)", "Reached maximum budget ($0.5)".
 */
const BUDGET_SUBTYPES: Record<string, { kind: BudgetKind; flag: string }> = {
  error_max_turns: { kind: 'turns', flag: 'max_turns' },
  error_max_budget_usd: { kind: 'cost', flag: 'max_budget_usd' },
};

/** "stopped: it reached max_turns (3) after 4 turns, $0.0120": the limit as claude's message names it, and what was spent. */
function budgetError(flag: string, result: Record<string, unknown>, cost: number | undefined): string {
  const message = (Array.isArray(result.errors) ? result.errors : []).map(asString).find(Boolean) ?? '';
  const limit = /\(([^()]*)\)\s*$/.exec(message)?.[1];
  const n = result.num_turns;
  const turns = typeof n === 'number' ? `${n} turn${n === 1 ? '' : 's'}` : undefined;
  const spent = [turns, cost !== undefined ? `$${cost}` : undefined].filter(Boolean).join(', ');
  return `stopped: it reached ${flag}${limit ? ` (${limit})` : ''}${spent ? ` after ${spent}` : ''}`;
}

/** Claude refuses to skip permissions as root unless told it is sandboxed (its ACP adapter, to start at all). */
export const rootSandboxEnv = (): Record<string, string> => (process.getuid?.() === 0 ? { IS_SANDBOX: '1' } : {});
const PLAN_STATUSES = ['pending', 'in_progress', 'completed'] as const;

/** One tool_use block of an assistant message: a command, an edit, the todo list, or another tool. */
function toolStep(block: Record<string, unknown>): TranscriptEntry {
  const id = asString(block.id);
  const name = asString(block.name) ?? 'tool';
  const input = field(block, 'input');
  const text = (key: string) => asString(field(input, key));
  const path = text('file_path') ?? text('notebook_path') ?? '';
  if (name === 'Bash') return { kind: 'command', id, command: text('command') ?? '', status: 'running' };
  if (name === 'Edit') {
    return {
      kind: 'edit',
      id,
      path,
      change: 'update',
      status: 'running',
      before: text('old_string'),
      after: text('new_string'),
    };
  }
  if (name === 'Write') return { kind: 'edit', id, path, change: 'write', status: 'running', after: text('content') };
  if (name === 'TodoWrite') {
    const todos = field(input, 'todos');
    return {
      kind: 'plan',
      items: (Array.isArray(todos) ? todos : []).map((todo) => ({
        text: asString(field(todo, 'content')) ?? '',
        status: PLAN_STATUSES.find((s) => s === field(todo, 'status')) ?? 'pending',
      })),
    };
  }
  // An MCP server's tool: mcp__<server>__<tool>.
  const mcp = /^mcp__(.+?)__(.+)$/.exec(name);
  return {
    kind: 'tool',
    id,
    name: mcp ? mcp[2]! : name,
    ...(mcp ? { server: mcp[1] } : {}),
    input: argumentsText(input),
    status: 'running',
  };
}

/** A tool_result block of a user message: the outcome of the tool_use with that id. */
function toolDone(block: Record<string, unknown>): TranscriptEntry | undefined {
  const id = asString(block.tool_use_id);
  if (!id) return undefined;
  const output = contentText(block.content);
  const failed = block.is_error === true;
  // A failed Bash command's result begins "Exit code N"; a command that ran through exited 0.
  const code = failed ? /^Exit code (\d+)/.exec(output)?.[1] : '0';
  return { kind: 'done', id, status: failed ? 'failed' : 'ok', output, ...(code ? { exitCode: Number(code) } : {}) };
}

const blocksOf = (record: Record<string, unknown>): Record<string, unknown>[] => {
  const content = field(record, 'message', 'content');
  return Array.isArray(content)
    ? content.filter((b): b is Record<string, unknown> => !!b && typeof b === 'object')
    : [];
};

/** Set inside a running Claude Code: a claude started with it refuses to run (nested). */
const REMOVED_ENV = ['CLAUDECODE'];

export const claude: CliBackend = {
  name: 'claude',
  kind: 'cli',
  title: 'Claude Code agent',
  // Anthropic keys: sk-ant-api03-…; codex's sk- shape covers them too, this one holds without codex.
  secretPatterns: [String.raw`\bsk-ant-[A-Za-z0-9_-]{12,}`],
  models: {
    default: 'sonnet',
    aliases: { opus: 'opus', sonnet: 'sonnet', haiku: 'haiku', fable: 'fable' },
    prices: {},
  },
  description: 'Claude Code: multi-file changes, refactors, debugging, reviews.',
  executable: 'claude',
  binEnv: 'POLYSPAWN_CLAUDE_BIN',
  installHint: 'install it with `npm install -g @anthropic-ai/claude-code`',
  supportsSystemPrompt: true,
  supportsResume: true,
  supportsToolLists: true,
  permissionModes: ['bypassPermissions', 'acceptEdits', 'auto', 'dontAsk', 'plan', 'manual'],
  // dontAsk: what is not allowed is denied, without a prompt nobody would answer.
  allowListPermission: 'dontAsk',
  supportsMcpServers: true,
  // An API key, a bearer token (a gateway's), or the token `claude setup-token` makes.
  loginEnv: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN'],
  removeEnv: REMOVED_ENV,
  // `claude auth status` prints JSON ({"loggedIn", "authMethod", "apiKeySource", ...}), exit 1 when signed out.
  signInCheck: {
    args: ['auth', 'status', '--json'],
    read: ({ stdout }) => {
      let status: unknown;
      try {
        status = JSON.parse(stdout);
      } catch {
        return undefined;
      }
      const loggedIn = field(status, 'loggedIn');
      if (loggedIn === false)
        return {
          signedIn: false,
          fix: 'not signed in: run `claude auth login` (or `claude`, then /login), or set ANTHROPIC_API_KEY',
        };
      if (loggedIn !== true) return undefined;
      // Names only (a method, a variable's name), never a value; anything else it says is left out.
      const name = (value: unknown) => {
        const text = asString(value);
        return text && /^[\w.-]{1,40}$/.test(text) ? text : undefined;
      };
      const method = name(field(status, 'authMethod'));
      const source = name(field(status, 'apiKeySource'));
      return {
        signedIn: true,
        how: [method, source && `key from ${source}`].filter(Boolean).join(', ') || undefined,
      };
    },
  },
  // CLAUDE_CONFIG_DIR holds everything; without it, ~/.claude and the ~/.claude.json beside it.
  modelEndpointEnv: ['ANTHROPIC_BASE_URL'],
  sandboxPaths: {
    state: (env, home) =>
      env.CLAUDE_CONFIG_DIR
        ? { dirs: [env.CLAUDE_CONFIG_DIR], files: [] }
        : { dirs: [join(home, '.claude')], files: [join(home, '.claude.json')] },
    install: npmInstall,
  },
  // --json-schema takes the schema as one argument, and Linux caps one at 128 KiB (with room to spare).
  maxOutputSchemaBytes: 120 * 1024,
  // --max-turns is not in `claude --help` (2.1.332) but works: measured on the real CLI (FINDINGS.md).
  budgetFlags: ['turns', 'cost'],

  command(input, settings, { scratchDir, parent }) {
    const args = ['-p', '--output-format', 'stream-json', '--verbose', '--model', input.model];
    const files: Record<string, string> = {};
    if (input.systemPrompt) {
      // A file, not an argument: Linux caps one argument at 128 KiB, and a system prompt may be longer.
      const path = `${scratchDir}/claude-system-prompt.md`;
      files[path] = input.systemPrompt;
      args.push('--append-system-prompt-file', path);
    }
    // Joined with `=`: the id is --resume's value, never an option of its own.
    if (input.resumeSessionId) args.push(`--resume=${input.resumeSessionId}`);
    if (input.budget?.maxTurns) args.push('--max-turns', String(input.budget.maxTurns));
    if (input.budget?.maxBudgetUsd) args.push('--max-budget-usd', String(input.budget.maxBudgetUsd));
    const env: Record<string, string | undefined> = Object.fromEntries(REMOVED_ENV.map((name) => [name, undefined]));
    if (settings.permission === 'bypassPermissions') {
      args.push('--dangerously-skip-permissions');
      Object.assign(env, rootSandboxEnv());
    } else {
      args.push('--permission-mode', settings.permission);
    }
    // The channel's tools never wait on a permission prompt nobody in -p mode would answer.
    const allowTools = [...settings.allowTools, ...(parent ? [`mcp__${parent.name}`] : [])];
    if (allowTools.length) args.push('--allowedTools', ...allowTools);
    if (settings.denyTools.length) args.push('--disallowedTools', ...settings.denyTools);
    // The model answers through claude's StructuredOutput tool; the result's structured_output holds it.
    if (input.outputSchema) args.push('--json-schema', JSON.stringify(input.outputSchema));
    const servers = {
      ...(input.mcpServers ? mapValues(input.mcpServers, claudeMcpServer) : {}),
      ...(parent
        ? {
            [parent.name]: {
              ...claudeMcpServer({ url: parent.url, headers: bearerFromEnv(parent) }),
              // Offered to the model at once (not deferred behind ToolSearch), and a question
              // may block past claude's default wait for a tool.
              alwaysLoad: true,
              timeout: parent.toolCallS * 2 * 1000,
            },
          }
        : {}),
    };
    if (Object.keys(servers).length) {
      // A file, not an argument: a server's env or headers may hold a token.
      const path = `${scratchDir}/claude-mcp.json`;
      files[path] = JSON.stringify({ mcpServers: servers }, null, 2);
      args.push('--mcp-config', path);
      // An agent definition's servers replace the user's; the channel alone adds to them.
      if (input.mcpServers) args.push('--strict-mcp-config');
    }
    return { file: settings.bin ?? 'claude', args, env, stdin: input.prompt, files };
  },

  transcript(record) {
    if (record.type === 'assistant') {
      return blocksOf(record).flatMap((block): TranscriptEntry[] => {
        if (block.type === 'text')
          return asString(block.text) ? [{ kind: 'message', text: asString(block.text)! }] : [];
        if (block.type === 'thinking')
          return asString(block.thinking) ? [{ kind: 'reasoning', text: asString(block.thinking)! }] : [];
        return block.type === 'tool_use' ? [toolStep(block)] : [];
      });
    }
    if (record.type === 'user') {
      return blocksOf(record).flatMap((block) => (block.type === 'tool_result' ? (toolDone(block) ?? []) : []));
    }
    if (record.type === 'system' && record.subtype === 'api_retry') {
      const status = record.error_status ?? record.error ?? 'an error';
      const delay = asNumber(record.retry_delay_ms) / 1000;
      return [
        {
          kind: 'notice',
          text: `the model request failed (${String(status)}); retry ${asNumber(record.attempt)} of ${asNumber(record.max_retries)} in ${delay.toFixed(1)} s`,
        },
      ];
    }
    if (record.type === 'result' && (record.is_error !== false || asString(record.subtype)?.startsWith('error'))) {
      const errors = (Array.isArray(record.errors) ? record.errors : []).map(asString).filter(Boolean);
      const text = [asString(record.result), ...errors].filter(Boolean).join('\n');
      return [{ kind: 'error', text: text || `the run ended with ${asString(record.subtype) ?? 'an error'}` }];
    }
    return [];
  },

  parse(run) {
    // stream-json ends with the same result object that --output-format json prints alone.
    const result = jsonLines(run.stdout).records.findLast((r) => r.type === 'result');
    if (!result)
      return { ok: false, text: '', error: missingResult('claude', 'a result record', run), costSource: 'unknown' };
    const text = asString(result.result) ?? '';
    const isError = result.is_error !== false;
    const usage = field(result, 'usage');
    const cacheRead = asNumber(field(usage, 'cache_read_input_tokens'));
    const cost = runCost(result);
    const budgetHit = BUDGET_SUBTYPES[asString(result.subtype) ?? ''];
    return {
      ok: !isError && run.exitCode === 0,
      text,
      ...(budgetHit
        ? { error: budgetError(budgetHit.flag, result, cost), budgetExceeded: budgetHit.kind }
        : isError
          ? {
              error: `claude reported an error${result.api_error_status ? ` (API status ${result.api_error_status})` : ''}: ${text || asString(result.subtype) || 'no message'}`,
            }
          : run.exitCode !== 0
            ? { error: `claude exited with code ${run.exitCode}` }
            : {}),
      sessionId: asString(result.session_id),
      usage: {
        inputTokens:
          asNumber(field(usage, 'input_tokens')) + asNumber(field(usage, 'cache_creation_input_tokens')) + cacheRead,
        outputTokens: asNumber(field(usage, 'output_tokens')),
        cachedInputTokens: cacheRead,
      },
      ...(typeof cost === 'number'
        ? { costUsd: cost, costSource: 'reported' as const }
        : { costSource: 'unknown' as const }),
      ...(result.structured_output !== undefined && result.structured_output !== null
        ? { structuredOutput: result.structured_output }
        : {}),
      raw: result,
    };
  },
};

function claudeMcpServer(spec: McpServerSpec): Record<string, unknown> {
  return 'url' in spec
    ? { type: 'http', url: spec.url, headers: spec.headers }
    : { type: 'stdio', command: spec.command, args: spec.args ?? [], env: spec.env ?? {} };
}
