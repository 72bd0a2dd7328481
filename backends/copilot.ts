// GitHub Copilot CLI: with no -p it reads the prompt from stdin; JSONL events on stdout,
// the session's token totals in the file named by --usage-output-file.
import type { CliBackend, McpServerSpec, TranscriptEntry, Usage } from './types.js';
import { join } from 'node:path';
import { npmInstall, stateDir } from './sandbox-paths.js';
import { argumentsText, asNumber, asString, contentText, field, jsonLines, missingResult } from './jsonl.js';
import { bearerFromEnv, mapValues } from './mcp-servers.js';

function usageFromFile(text: string | undefined): Usage | undefined {
  if (!text) return undefined;
  let metrics: unknown;
  try {
    metrics = field(JSON.parse(text), 'modelMetrics');
  } catch {
    return undefined;
  }
  if (!metrics || typeof metrics !== 'object') return undefined;
  const total: Usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 };
  for (const model of Object.values(metrics)) {
    total.inputTokens += asNumber(field(model, 'usage', 'inputTokens'));
    total.outputTokens += asNumber(field(model, 'usage', 'outputTokens'));
    total.cachedInputTokens += asNumber(field(model, 'usage', 'cacheReadTokens'));
  }
  return total;
}

/** tool.execution_start: a command (bash), an edit (edit, create), or another tool; `<server>-<tool>` for an MCP server's. */
function toolStep(data: unknown): TranscriptEntry {
  const id = asString(field(data, 'toolCallId'));
  const name = asString(field(data, 'toolName')) ?? 'tool';
  const args = field(data, 'arguments');
  const text = (key: string) => asString(field(args, key));
  if (name === 'bash') return { kind: 'command', id, command: text('command') ?? '', status: 'running' };
  if (name === 'edit') {
    return {
      kind: 'edit',
      id,
      path: text('path') ?? '',
      change: 'update',
      status: 'running',
      before: text('old_str'),
      after: text('new_str'),
    };
  }
  if (name === 'create')
    return { kind: 'edit', id, path: text('path') ?? '', change: 'add', status: 'running', after: text('file_text') };
  const server = asString(field(data, 'mcpServerName'));
  const tool = asString(field(data, 'mcpToolName'));
  const split = /^([^-]+)-(.+)$/.exec(name);
  return {
    kind: 'tool',
    id,
    ...(server && tool ? { server, name: tool } : split ? { server: split[1], name: split[2]! } : { name }),
    input: argumentsText(args),
    status: 'running',
  };
}

/** tool.execution_complete: the outcome of the tool call with that id. */
function toolDone(data: unknown): TranscriptEntry | undefined {
  const id = asString(field(data, 'toolCallId'));
  if (!id) return undefined;
  const code = field(data, 'shellExecution', 'exitCode');
  const output = asString(field(data, 'error', 'message')) ?? contentText(field(data, 'result', 'content'));
  return {
    kind: 'done',
    id,
    status: field(data, 'success') === true ? 'ok' : 'failed',
    ...(typeof code === 'number' ? { exitCode: code } : {}),
    // A command's result ends with copilot's own note of its shell and exit code.
    output: output.replace(/\n?<shellId: [^>]*>\s*$/, ''),
  };
}

export const copilot: CliBackend = {
  name: 'copilot',
  kind: 'cli',
  title: 'GitHub Copilot agent',
  // GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained personal access tokens.
  secretPatterns: [String.raw`\bgh[pousr]_[A-Za-z0-9]{20,}`, String.raw`\bgithub_pat_[A-Za-z0-9_]{20,}`],
  models: { default: 'gpt-5.4', aliases: { gpt: 'gpt-5.4', claude: 'claude-sonnet-4.5', auto: 'auto' }, prices: {} },
  description: 'GitHub Copilot CLI: billed in premium requests, not tokens.',
  executable: 'copilot',
  binEnv: 'POLYSPAWN_COPILOT_BIN',
  installHint: 'install it with `npm install -g @github/copilot`',
  // No flag for it: an instructions file in a folder named by COPILOT_CUSTOM_INSTRUCTIONS_DIRS
  // is appended to copilot's system message.
  supportsSystemPrompt: true,
  supportsResume: true,
  supportsToolLists: true,
  permissionModes: ['allow-all', 'listed'],
  allowListPermission: 'listed',
  supportsMcpServers: true,
  // GitHub's tokens, in copilot's order; and a model provider's key or token (its BYOK mode).
  loginEnv: [
    'COPILOT_GITHUB_TOKEN',
    'GH_TOKEN',
    'GITHUB_TOKEN',
    'COPILOT_PROVIDER_API_KEY',
    'COPILOT_PROVIDER_BEARER_TOKEN',
  ],

  // COPILOT_HOME (config, sessions, logins), and the package it unpacks and updates in its cache.
  modelEndpointEnv: ['COPILOT_PROVIDER_BASE_URL'],
  sandboxPaths: {
    state: (env, home) => ({
      dirs: [
        stateDir(env, 'COPILOT_HOME', home, '.copilot'),
        join(stateDir(env, 'XDG_CACHE_HOME', home, '.cache'), 'copilot'),
      ],
      files: [],
    }),
    install: npmInstall,
  },

  command(input, settings, { scratchDir, env: inherited, parent }) {
    const usageFile = `${scratchDir}/copilot-usage.json`;
    const args = ['--output-format', 'json', '--no-auto-update', '--no-ask-user', '--no-color'];
    args.push('--model', input.model, '--usage-output-file', usageFile);
    // --resume takes an optional value, so it must be joined with `=`.
    if (input.resumeSessionId) args.push(`--resume=${input.resumeSessionId}`);
    if (settings.permission === 'allow-all') args.push('--allow-all-tools', '--allow-all-paths');
    // Variadic: one flag followed by all its values.
    // `<server>` allows every tool of that MCP server: the channel's never wait on a prompt.
    const allowTools = [
      ...settings.allowTools,
      ...(parent && settings.permission !== 'allow-all' ? [parent.name] : []),
    ];
    if (allowTools.length) args.push('--allow-tool', ...allowTools);
    if (settings.denyTools.length) args.push('--deny-tool', ...settings.denyTools);
    const env: Record<string, string> = {};
    const files: Record<string, string> = {};
    if (input.systemPrompt) {
      const dir = `${scratchDir}/copilot-instructions`;
      files[`${dir}/.github/instructions/polyspawn.instructions.md`] = input.systemPrompt;
      const existing = inherited?.COPILOT_CUSTOM_INSTRUCTIONS_DIRS;
      env.COPILOT_CUSTOM_INSTRUCTIONS_DIRS = existing ? `${existing},${dir}` : dir;
    }
    const servers: Record<string, Record<string, unknown>> = mapValues(input.mcpServers ?? {}, copilotMcpServer);
    if (parent) {
      servers[parent.name] = {
        ...copilotMcpServer({ url: parent.url, headers: bearerFromEnv(parent) }),
        timeout: parent.toolCallS * 2 * 1000,
      };
    }
    if (Object.keys(servers).length) {
      // `@file`, not the JSON itself: copilot's help says never to put a token in the argument.
      const path = `${scratchDir}/copilot-mcp.json`;
      files[path] = JSON.stringify({ mcpServers: servers }, null, 2);
      args.push('--additional-mcp-config', `@${path}`);
    }
    return { file: settings.bin ?? 'copilot', args, env, stdin: input.prompt, files, artifacts: { usage: usageFile } };
  },

  // Each model request begins with assistant.turn_start (tokens: only in the usage file, at exit).
  liveTurn: (record) => record.type === 'assistant.turn_start',

  transcript(record) {
    const data = record.data;
    switch (record.type) {
      case 'assistant.message': {
        const text = asString(field(data, 'content'));
        return text ? [{ kind: 'message', text }] : [];
      }
      case 'assistant.reasoning': {
        const text = asString(field(data, 'content'));
        return text ? [{ kind: 'reasoning', text }] : [];
      }
      case 'tool.execution_start':
        return [toolStep(data)];
      case 'tool.execution_complete': {
        const done = toolDone(data);
        return done ? [done] : [];
      }
      case 'assistant.turn_retry':
        return [
          {
            kind: 'notice',
            text: `the model request is retried (${asString(field(data, 'reason')) ?? 'no reason given'})`,
          },
        ];
      case 'session.error':
        return [{ kind: 'error', text: asString(field(data, 'message')) ?? 'the session failed' }];
      default:
        return [];
    }
  },

  parse(run) {
    const { records } = jsonLines(run.stdout);
    const result = records.findLast((r) => r.type === 'result');
    const answer = records.findLast((r) => r.type === 'assistant.message' && asString(field(r, 'data', 'content')));
    const sessionError = records.findLast((r) => r.type === 'session.error');
    const premium = field(result, 'usage', 'premiumRequests');
    const totals = usageFromFile(run.artifacts.usage);
    const common = {
      text: asString(field(answer, 'data', 'content')) ?? '',
      sessionId: asString(field(result, 'sessionId')) || undefined,
      sessionTotals: totals,
      premiumRequests: typeof premium === 'number' ? premium : undefined,
      costSource: 'unknown' as const,
      raw: result ?? null,
    };
    if (sessionError) {
      const message = asString(field(sessionError, 'data', 'message')) ?? 'no message';
      return { ok: false, ...common, error: `copilot reported an error: ${message}` };
    }
    if (!result) return { ok: false, ...common, error: missingResult('copilot', 'a result record', run) };
    const code = field(result, 'exitCode');
    if (code !== 0 || run.exitCode !== 0) {
      return {
        ok: false,
        ...common,
        error: `copilot exited with code ${typeof code === 'number' ? code : run.exitCode}`,
      };
    }
    return { ok: true, ...common };
  },
};

function copilotMcpServer(spec: McpServerSpec): Record<string, unknown> {
  return 'url' in spec
    ? { type: 'http', url: spec.url, headers: spec.headers, tools: ['*'] }
    : { type: 'local', command: spec.command, args: spec.args ?? [], env: spec.env ?? {}, tools: ['*'] };
}
