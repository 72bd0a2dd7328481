// Gemini CLI (`@google/gemini-cli`), headless: `gemini -p ''` with the prompt on stdin (it
// appends stdin to -p's text), stream-json events on stdout. Measured on 0.61.0 against the
// fake model API (test/fakes/fake-api.md, test/contract/FINDINGS.md, "Gemini CLI").
//
// - Each prompt first asks a small model (flash-lite) which model to use, then runs on it; its
//   result's stats list the tokens per model, so both are counted and priced (usageByModel).
// - Its shell commands run in sessions of their own (setsid): the runner finds them by the run's
//   mark (src/jobs/process/run-processes.ts), so a cancel or the end of the run ends them too.
// - Its temp files (gemini-shell-*, gemini-client-error-*.json) go to the run's folder.
// - An untrusted folder makes it exit 55: the user asked polyspawn to run it in that folder,
//   so --skip-trust (for this run only; nothing is written to its trusted-folders file).
import type { CliBackend, Usage } from './types.js';
import { join } from 'node:path';
import { gemini } from './gemini.js';
import { npmInstall } from './sandbox-paths.js';
import { asNumber, asString, field, jsonLines, missingResult } from './jsonl.js';

/** Its permission modes: polyspawn's name for each, and its --approval-mode. */
const APPROVAL_MODES = {
  // Every tool, shell commands included, without asking.
  yolo: 'yolo',
  // File edits (write_file, replace) and web fetches, no shell.
  auto_edit: 'auto_edit',
  // Headless, its default mode offers read-only tools only (it never asks anyone).
  'read-only': 'default',
} as const;
type Permission = keyof typeof APPROVAL_MODES;

/**
 * Exit codes of 0.61.0 that say more than the result record does (it prints none for them).
 * An API error exits with its HTTP status mod 256 (401 → 145) after a result record of its own.
 */
const EXIT_MEANINGS: Record<number, string> = {
  41: 'it refused the login method (a base URL without `security.auth.selectedType` in its settings.json means gateway auth, which headless mode refuses)',
  42: 'the session to resume is unknown to it (or was lost: README, "Gemini CLI")',
  55: 'it does not trust the folder',
};

/** The element that carries the system prompt before the task (see supportsSystemPrompt). */
const INSTRUCTIONS_TAG = 'polyspawn_instructions';

/** A result's stats for one model (or the run's totals): input includes the cached part. */
function usageOf(stats: unknown): Usage {
  return {
    inputTokens: asNumber(field(stats, 'input_tokens')),
    outputTokens: asNumber(field(stats, 'output_tokens')),
    cachedInputTokens: asNumber(field(stats, 'cached')),
  };
}

export const geminiCli: CliBackend = {
  // `gemini` is the API backend (text by HTTP); this is its vendor's agent that edits files.
  name: 'gemini_cli',
  kind: 'cli',
  title: 'Gemini CLI agent',
  secretPatterns: gemini.secretPatterns,
  models: {
    // auto: its own router picks flash or pro per prompt (a flash-lite request first).
    default: 'auto',
    aliases: { auto: 'auto', pro: 'pro', flash: 'flash', lite: 'flash-lite' },
    prices: {
      ...gemini.models.prices,
      // USD per million tokens, at Google's prices in November 2026 (3.8 Flash: its launch price
      // until 31 December 2026); the models its aliases resolve to in 0.61.0.
      'gemini-3.8-flash': { input: 0.75, cachedInput: 0.075, output: 3.75 },
      'gemini-3.5-flash-lite': { input: 0.3, cachedInput: 0.03, output: 2.5 },
    },
  },
  description: "Google's Gemini CLI: file edits and shell commands in a folder, its own model routing.",
  executable: 'gemini',
  binEnv: 'POLYSPAWN_GEMINI_BIN',
  installHint: 'install it with `npm install -g @google/gemini-cli`',
  // No flag adds to its system prompt (GEMINI_SYSTEM_MD replaces all of it: tools, safety), and a
  // context file in a folder of the run's own was not loaded (0.61.0): the system prompt goes
  // before the task, in an element of its own (INSTRUCTIONS_TAG), in each run's message.
  supportsSystemPrompt: true,
  supportsResume: true,
  supportsToolLists: false,
  permissionModes: ['yolo', 'auto_edit', 'read-only'],
  // It reads MCP servers from its settings files alone: the user's and the project's, which
  // polyspawn never writes, and system ones that it skips unless root owns them and every folder
  // above them (measured: "Skipping system settings file ...: Parent directory '/tmp' is
  // insecure"). So no agent MCP servers and no channel to the orchestrator (ask_parent) here:
  // Gemini CLI over ACP takes MCP servers per session.
  supportsMcpServers: false,
  // Its API keys, a service account's key file, and its home (settings, logins, sessions).
  loginEnv: ['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_APPLICATION_CREDENTIALS', 'GEMINI_CLI_HOME'],
  modelEndpointEnv: ['GOOGLE_GEMINI_BASE_URL'],
  sandboxPaths: {
    // <GEMINI_CLI_HOME or home>/.gemini: settings, logins, sessions.
    state: (env, home) => ({ dirs: [join(env.GEMINI_CLI_HOME || home, '.gemini')], files: [] }),
    install: npmInstall,
  },

  command(input, settings, { scratchDir }) {
    const mode = APPROVAL_MODES[settings.permission as Permission] ?? 'default';
    const args = ['-p', '', '-o', 'stream-json', '--skip-trust', '--approval-mode', mode];
    // The alias auto is its own default: left out, so its settings' model.name still applies.
    if (input.model !== 'auto') args.push('--model', input.model);
    // Joined with `=`: the id is --resume's value, never an option of its own.
    if (input.resumeSessionId) args.push(`--resume=${input.resumeSessionId}`);
    const stdin = input.systemPrompt
      ? `<${INSTRUCTIONS_TAG}>\n${input.systemPrompt}\n</${INSTRUCTIONS_TAG}>\n\n${input.prompt}`
      : input.prompt;
    // Its shell folders (gemini-shell-*) and error reports (gemini-client-error-*.json) land in
    // the run's folder, beside its logs, not in the machine's /tmp.
    return { file: settings.bin ?? 'gemini', args, env: { TMPDIR: scratchDir }, stdin };
  },

  // The first model request begins with init; each tool call is followed by another.
  liveTurn: (record) => record.type === 'init' || record.type === 'tool_use',

  parse(run) {
    const { records } = jsonLines(run.stdout);
    const init = records.find((r) => r.type === 'init');
    const result = records.findLast((r) => r.type === 'result');
    // The answer: the assistant's text after the last tool call, sent in deltas.
    const lastTool = records.findLastIndex((r) => r.type === 'tool_use' || r.type === 'tool_result');
    const text = records
      .slice(lastTool + 1)
      .filter((r) => r.type === 'message' && r.role === 'assistant')
      .map((r) => asString(r.content) ?? '')
      .join('');
    const stats = field(result, 'stats');
    const models = field(stats, 'models');
    const usageByModel =
      models && typeof models === 'object'
        ? Object.fromEntries(
            Object.entries(models)
              .map(([model, m]) => [model, usageOf(m)] as const)
              .filter(([, u]) => u.inputTokens + u.outputTokens > 0),
          )
        : undefined;
    const common = {
      text,
      sessionId: asString(field(init, 'session_id')) || undefined,
      ...(stats ? { usage: usageOf(stats), usageByModel } : {}),
      costSource: 'unknown' as const,
      raw: result ?? null,
    };
    if (!result) {
      const meaning = EXIT_MEANINGS[run.exitCode ?? -1];
      const stderr = run.stderr.trim().split('\n').slice(0, 2).join(' | ');
      return {
        ok: false,
        ...common,
        error: meaning
          ? `gemini exited with code ${run.exitCode}: ${meaning}${stderr ? `; stderr: ${stderr}` : ''}`
          : missingResult('gemini', 'a result record', run),
      };
    }
    if (result.status !== 'success') {
      const message = asString(field(result, 'error', 'message')) ?? 'no message';
      return { ok: false, ...common, error: `gemini reported an error: ${message}` };
    }
    if (run.exitCode !== 0) return { ok: false, ...common, error: `gemini exited with code ${run.exitCode}` };
    return { ok: true, ...common };
  },
};
