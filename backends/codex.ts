// OpenAI Codex: `codex exec --json -`, prompt on stdin (an open stdin hangs it forever).
import type { CliBackend, StepStatus, TranscriptEntry, Usage } from './types.js';
import { npmInstall, stateDir } from './sandbox-paths.js';
import { argumentsText, asNumber, asString, contentText, field, jsonLines, missingResult } from './jsonl.js';

/** A TOML basic string, for `-c key=value` overrides (JSON string escapes are valid TOML). */
const tomlString = (text: string) => JSON.stringify(text);
/** A TOML inline table of strings, with quoted keys. */
const tomlTable = (entries: Record<string, string>) =>
  `{${Object.entries(entries)
    .map(([k, v]) => `${tomlString(k)} = ${tomlString(v)}`)
    .join(', ')}}`;
/** A TOML array of strings. */
const tomlList = (items: readonly string[]) => `[${items.map(tomlString).join(', ')}]`;

/**
 * The variable that holds the agent's n-th MCP header value (n counts over all its servers, so
 * names that differ only in case or `-`/`_` cannot collide), with SECRET in it so that codex's
 * default shell environment policy keeps it from the commands the model runs.
 */
const headerVariable = (server: string, n: number) =>
  `POLYSPAWN_MCP_${server.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_SECRET_${n}`;

/** The items of a model request that are not tool calls (no request follows them). */
const NOT_TOOL_CALLS = ['agent_message', 'reasoning', 'todo_list'];

/** A turn.completed event's usage: the thread's running totals. */
function usageOf(usage: unknown): Usage | undefined {
  if (!usage || typeof usage !== 'object') return undefined;
  return {
    inputTokens: asNumber(field(usage, 'input_tokens')),
    outputTokens: asNumber(field(usage, 'output_tokens')),
    cachedInputTokens: asNumber(field(usage, 'cached_input_tokens')),
  };
}

/** An item's status: in_progress while it runs; completed, failed or declined once it ended. */
const stepStatus = (status: unknown): StepStatus =>
  status === 'in_progress' ? 'running' : status === 'completed' ? 'ok' : 'failed';

/** codex runs each command through a login shell: `/bin/bash -lc '<command>'` shows as the command. */
function shellCommand(command: string): string {
  const wrapped = /^\S*\/(?:ba|z)?sh -lc '([\s\S]*)'$/.exec(command);
  return wrapped ? wrapped[1]!.replaceAll(`'\\''`, `'`) : command;
}

/** One item of the thread (item.started, item.updated, item.completed) as transcript entries. */
function itemSteps(item: unknown, completed: boolean): TranscriptEntry[] {
  const id = asString(field(item, 'id'));
  const text = asString(field(item, 'text')) ?? '';
  const status = stepStatus(field(item, 'status') ?? (completed ? 'completed' : 'in_progress'));
  switch (field(item, 'type')) {
    case 'agent_message':
      return completed && text ? [{ kind: 'message', text }] : [];
    case 'reasoning':
      return completed && text ? [{ kind: 'reasoning', text }] : [];
    case 'command_execution': {
      const code = field(item, 'exit_code');
      return [
        {
          kind: 'command',
          id,
          command: shellCommand(asString(field(item, 'command')) ?? ''),
          status,
          ...(typeof code === 'number' ? { exitCode: code } : {}),
          output: asString(field(item, 'aggregated_output')) ?? '',
        },
      ];
    }
    case 'file_change': {
      // exec --json names the files and how each changed, without the diff.
      const changes = field(item, 'changes');
      return (Array.isArray(changes) ? changes : []).map((change, n) => ({
        kind: 'edit',
        id: `${id}/${n}`,
        path: asString(field(change, 'path')) ?? '',
        change: (['add', 'delete'] as const).find((k) => k === field(change, 'kind')) ?? 'update',
        status,
      }));
    }
    case 'mcp_tool_call': {
      const error = asString(field(item, 'error', 'message'));
      return [
        {
          kind: 'tool',
          id,
          name: asString(field(item, 'tool')) ?? 'tool',
          server: asString(field(item, 'server')),
          input: argumentsText(field(item, 'arguments')),
          status,
          output: error ?? contentText(field(item, 'result', 'content')),
        },
      ];
    }
    case 'web_search':
      return [{ kind: 'tool', id, name: 'web_search', input: asString(field(item, 'query')) ?? '', status }];
    case 'todo_list': {
      const items = field(item, 'items');
      return [
        {
          kind: 'plan',
          items: (Array.isArray(items) ? items : []).map((todo) => ({
            text: asString(field(todo, 'text')) ?? '',
            status: field(todo, 'completed') === true ? ('completed' as const) : ('pending' as const),
          })),
        },
      ];
    }
    case 'error':
      return completed ? [{ kind: 'notice', text: asString(field(item, 'message')) ?? 'an error' }] : [];
    default:
      return [];
  }
}

const LOGIN_ENV = ['OPENAI_API_KEY', 'CODEX_API_KEY', 'CODEX_HOME'];
/** Variables codex itself runs by: an MCP server's env may not set them (see mcpServersProblem). */
const OWN_ENV = ['HOME', 'PATH', ...LOGIN_ENV];

export const codex: CliBackend = {
  name: 'codex',
  kind: 'cli',
  title: 'OpenAI Codex agent',
  // OpenAI keys: sk-…, sk-proj-…, sk-svcacct-…
  secretPatterns: [String.raw`\bsk-[A-Za-z0-9_-]{16,}`],
  models: {
    default: 'gpt-5.5',
    aliases: { default: 'gpt-5.5', fast: 'gpt-5.4-mini', codex: 'gpt-5.5-codex' },
    prices: {
      'gpt-5.5': { input: 1.25, cachedInput: 0.125, output: 10 },
      'gpt-5.5-codex': { input: 1.25, cachedInput: 0.125, output: 10 },
      'gpt-5.4': { input: 1.25, cachedInput: 0.125, output: 10 },
      'gpt-5.4-mini': { input: 0.25, cachedInput: 0.025, output: 2 },
    },
  },
  description: 'OpenAI Codex CLI: focused implementation, tests, fixes.',
  executable: 'codex',
  binEnv: 'POLYSPAWN_CODEX_BIN',
  installHint: 'install it with `npm install -g @openai/codex`',
  supportsSystemPrompt: true,
  supportsResume: true,
  supportsToolLists: false,
  permissionModes: ['danger-full-access', 'workspace-write', 'read-only'],
  supportsMcpServers: true,
  loginEnv: LOGIN_ENV,
  // `codex login status`: exit 0 with "Logged in using ChatGPT" or "API key configured - ***" on
  // stderr, exit 1 with "Not logged in". It does not look at the keys codex exec reads from its environment.
  signInCheck: {
    args: ['login', 'status'],
    read: ({ exitCode, stdout, stderr }, env) => {
      const said = `${stdout}\n${stderr}`;
      if (exitCode === 0)
        return {
          signedIn: true,
          how: /chatgpt/i.test(said) ? 'ChatGPT' : /api key/i.test(said) ? 'API key' : undefined,
        };
      if (exitCode !== 1 || !/not logged in/i.test(said)) return undefined;
      const key = ['CODEX_API_KEY', 'OPENAI_API_KEY'].find((name) => env[name]);
      if (key) return { signedIn: true, how: `key from ${key}, checked at its first request` };
      return {
        signedIn: false,
        fix: 'not signed in: run `codex login` (or `printenv OPENAI_API_KEY | codex login --with-api-key`), or set CODEX_API_KEY',
      };
    },
  },
  modelEndpointEnv: ['OPENAI_BASE_URL'],
  sandboxPaths: {
    state: (env, home) => ({ dirs: [stateDir(env, 'CODEX_HOME', home, '.codex')], files: [] }),
    install: npmInstall,
  },
  // developer_instructions is a `-c` argument (no file takes its place: model_instructions_file
  // replaces codex's own instructions), and Linux caps one argument at 128 KiB.
  maxSystemPromptBytes: 120 * 1024,

  // A stdio server's env reaches it through codex's own environment (command() below), where a
  // variable has one value, and where it would also change codex's own settings.
  mcpServersProblem(servers) {
    const given = new Map<string, { server: string; value: string }>();
    for (const [server, spec] of Object.entries(servers)) {
      for (const [variable, value] of Object.entries(('env' in spec && spec.env) || {})) {
        if (OWN_ENV.includes(variable) || variable.startsWith('POLYSPAWN_'))
          return `mcp_servers.${server}.env.${variable}: codex gets a server's env through its own environment, where ${variable} is codex's or polyspawn's own setting: leave it out`;
        const earlier = given.get(variable);
        if (earlier && earlier.value !== value)
          return `mcp_servers: ${earlier.server} and ${server} give ${variable} different values, and codex passes a server's env from its own environment, where a variable has one value: give both the same value, or give one server's program another variable name`;
        given.set(variable, { server, value });
      }
    }
    return undefined;
  },

  command(input, settings, { scratchDir, parent }) {
    const resuming = input.resumeSessionId !== undefined;
    const args = resuming ? ['exec', 'resume'] : ['exec'];
    args.push('--json', '--skip-git-repo-check', '--model', input.model);
    if (settings.permission === 'danger-full-access') args.push('--dangerously-bypass-approvals-and-sandbox');
    // `exec resume` has no --sandbox flag; the config key does the same.
    else if (resuming) args.push('-c', `sandbox_mode=${tomlString(settings.permission)}`);
    else args.push('--sandbox', settings.permission);
    if (input.systemPrompt) args.push('-c', `developer_instructions=${tomlString(input.systemPrompt)}`);
    const files: Record<string, string> = {};
    if (input.outputSchema) {
      // `exec` and `exec resume` both take it (checked on the real CLI).
      const path = `${scratchDir}/output-schema.json`;
      files[path] = JSON.stringify(input.outputSchema, null, 2);
      args.push('--output-schema', path);
    }
    // Values (tokens) go in codex's environment, never in argv (`ps` shows it to every user):
    // argv names the variables codex reads them from. Server names are [A-Za-z0-9_-]+ (checked
    // where agents are defined): bare TOML keys.
    const env: Record<string, string> = {};
    let headers = 0;
    for (const [name, spec] of Object.entries(input.mcpServers ?? {})) {
      const key = `mcp_servers.${name}`;
      if ('url' in spec) {
        args.push('-c', `${key}.url=${tomlString(spec.url)}`);
        if (spec.headers) {
          const variables = Object.entries(spec.headers).map(([header, value]) => {
            const variable = headerVariable(name, ++headers);
            env[variable] = value;
            return [header, variable] as const;
          });
          args.push('-c', `${key}.env_http_headers=${tomlTable(Object.fromEntries(variables))}`);
        }
      } else {
        args.push('-c', `${key}.command=${tomlString(spec.command)}`);
        if (spec.args) args.push('-c', `${key}.args=${tomlList(spec.args)}`);
        if (spec.env) {
          // codex passes the variables named in env_vars from its own environment to the server;
          // mcpServersProblem refuses two servers giving one variable different values.
          Object.assign(env, spec.env);
          args.push('-c', `${key}.env_vars=${tomlList(Object.keys(spec.env))}`);
        }
      }
    }
    if (parent) {
      // The token stays in the environment: codex reads it from the variable named here.
      const key = `mcp_servers.${parent.name}`;
      args.push('-c', `${key}.url=${tomlString(parent.url)}`);
      args.push('-c', `${key}.bearer_token_env_var=${tomlString(parent.tokenEnv)}`);
      // A question may block for the whole answer wait; and exec's approval policy (never)
      // would refuse an MCP call that needs approval under a sandbox.
      args.push('-c', `${key}.tool_timeout_sec=${parent.toolCallS * 2}`);
      args.push('-c', `${key}.default_tools_approval_mode="approve"`);
      // exec may start its first turn before a server has listed its tools (measured with
      // 0.169.0 on a loaded machine): the model then has no ask_parent. Required, codex waits.
      args.push('-c', `${key}.required=true`);
    }
    // After `--` the id is the SESSION_ID positional, never an option (`--last`); `-` still means stdin.
    if (resuming) args.push('--', input.resumeSessionId!);
    args.push('-');
    return { file: settings.bin ?? 'codex', args, env, stdin: input.prompt, files };
  },

  // A model request has no event of its own in `exec --json`: the first begins with turn.started,
  // and every tool call the model makes is followed by another. (Tokens come once, at the end.)
  liveTurn(record) {
    if (record.type === 'turn.started') return true;
    return record.type === 'item.started' && !NOT_TOOL_CALLS.includes(asString(field(record, 'item', 'type')) ?? '');
  },

  transcript(record) {
    const type = asString(record.type) ?? '';
    if (type.startsWith('item.')) return itemSteps(record.item, type === 'item.completed');
    // An error event may be a retry the turn recovers from ("Reconnecting... 1/5"); turn.failed ends it.
    if (type === 'error') return [{ kind: 'notice', text: asString(record.message) ?? 'an error' }];
    if (type === 'turn.failed') {
      return [{ kind: 'error', text: asString(field(record, 'error', 'message')) ?? 'the turn failed' }];
    }
    return [];
  },

  parse(run) {
    const { records } = jsonLines(run.stdout);
    const threadId = asString(records.find((r) => r.type === 'thread.started')?.thread_id);
    const answer = records.findLast((r) => r.type === 'item.completed' && field(r, 'item', 'type') === 'agent_message');
    // `error` events also announce retries ("Reconnecting... 1/5") of turns that then succeed:
    // only turn.failed fails a turn.
    const failure = records.findLast((r) => r.type === 'turn.failed');
    const lastError = records.findLast((r) => r.type === 'error');
    const completed = records.findLast((r) => r.type === 'turn.completed');
    // Running totals for the thread: a resumed turn reports the earlier turns' tokens too.
    const usage = field(completed, 'usage');
    const totals = usageOf(usage);
    const text = asString(field(answer, 'item', 'text')) ?? '';
    const common = {
      text,
      sessionId: threadId || undefined,
      sessionTotals: totals,
      costSource: 'unknown' as const,
      raw: { thread_id: threadId, last_message: answer, failure, usage },
    };
    if (failure) {
      const message = asString(field(failure, 'error', 'message')) ?? asString(failure.message) ?? 'no message';
      return { ok: false, ...common, error: `codex reported an error: ${message}` };
    }
    if (!completed) {
      const message = asString(lastError?.message);
      return {
        ok: false,
        ...common,
        error: message ? `codex reported an error: ${message}` : missingResult('codex', 'a turn.completed event', run),
      };
    }
    if (run.exitCode !== 0) return { ok: false, ...common, error: `codex exited with code ${run.exitCode}` };
    return { ok: true, ...common };
  },
};
