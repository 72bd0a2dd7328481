// Claude Code: `claude -p`, prompt on stdin, stream-json so the log shows progress while it runs.
import type { CliBackend } from './types.js';
import { asNumber, asString, field, jsonLines, missingResult } from './jsonl.js';

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

export const claude: CliBackend = {
  name: 'claude',
  kind: 'cli',
  title: 'Claude Code agent',
  description:
    "Run Anthropic's Claude Code CLI as an autonomous coding agent in a folder: it can read, edit and create files and run commands. Good for multi-file changes, refactors, debugging and reviews.",
  executable: 'claude',
  binEnv: 'POLYSPAWN_CLAUDE_BIN',
  installHint: 'install it with `npm install -g @anthropic-ai/claude-code`',
  supportsSystemPrompt: true,
  supportsResume: true,
  supportsToolLists: true,
  permissionModes: ['bypassPermissions', 'acceptEdits', 'auto', 'dontAsk', 'plan', 'manual'],

  command(input, settings) {
    const args = ['-p', '--output-format', 'stream-json', '--verbose', '--model', input.model];
    if (input.systemPrompt) args.push('--append-system-prompt', input.systemPrompt);
    if (input.resumeSessionId) args.push('--resume', input.resumeSessionId);
    const env: Record<string, string | undefined> = { CLAUDECODE: undefined };
    if (settings.permission === 'bypassPermissions') {
      args.push('--dangerously-skip-permissions');
      // Claude refuses to skip permissions as root unless told it is sandboxed.
      if (process.getuid?.() === 0) env.IS_SANDBOX = '1';
    } else {
      args.push('--permission-mode', settings.permission);
    }
    if (settings.allowTools.length) args.push('--allowedTools', ...settings.allowTools);
    if (settings.denyTools.length) args.push('--disallowedTools', ...settings.denyTools);
    return { file: settings.bin ?? 'claude', args, env, stdin: input.prompt };
  },

  parse(run) {
    // stream-json ends with the same result object that --output-format json prints alone.
    const result = jsonLines(run.stdout).records.findLast((r) => r.type === 'result');
    if (!result) return { ok: false, text: '', error: missingResult('claude', 'a result record', run), costSource: 'unknown' };
    const text = asString(result.result) ?? '';
    const isError = result.is_error !== false;
    const usage = field(result, 'usage');
    const cacheRead = asNumber(field(usage, 'cache_read_input_tokens'));
    const cost = runCost(result);
    return {
      ok: !isError && run.exitCode === 0,
      text,
      ...(isError
        ? { error: `claude reported an error${result.api_error_status ? ` (API status ${result.api_error_status})` : ''}: ${text || asString(result.subtype) || 'no message'}` }
        : run.exitCode !== 0 ? { error: `claude exited with code ${run.exitCode}` } : {}),
      sessionId: asString(result.session_id),
      usage: {
        inputTokens: asNumber(field(usage, 'input_tokens')) + asNumber(field(usage, 'cache_creation_input_tokens')) + cacheRead,
        outputTokens: asNumber(field(usage, 'output_tokens')),
        cachedInputTokens: cacheRead,
      },
      ...(typeof cost === 'number' ? { costUsd: cost, costSource: 'reported' as const } : { costSource: 'unknown' as const }),
      raw: result,
    };
  },
};
