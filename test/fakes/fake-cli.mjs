#!/usr/bin/env node
// A stand-in for the real vendor CLIs (claude, codex, copilot, gemini) in tests: plain Node, no
// dependencies, so it starts fast. It reads the whole prompt from stdin (blocking until stdin
// is closed, like codex), then prints output in the real CLI's format, modeled on
// test/fixtures/cli-samples/. The answer is `FAKE <name>: <prompt>`.
//
// Which CLI it plays: the first argument when it is claude|codex|copilot|gemini (the wrappers in
// test/fakes/bin/ pass it), else env FAKE_CLI_AS, else the basename it was invoked as.
//
// `--version` prints `0.0.0-fake (<name>)` (env FAKE_CLI_VERSION=fail|hang: fails, never answers).
//
// Directives anywhere in the prompt change behaviour:
//   [[cli:fail]]            the CLI's failure shape (claude is_error + exit 1; codex error +
//                           turn.failed, exit 1; copilot session.error + result exitCode 1)
//   [[cli:fail-as:NAME]]    [[cli:fail]] for the CLI NAME only (a team's one failing member)
//   [[cli:sleep:MS]]        wait MS ms, then succeed
//   [[cli:hang]]            never exit
//   [[cli:ignore-term]]     ignore SIGTERM, then hang
//   [[cli:grandchild:FILE]] spawn a long-lived node grandchild in the same process group, its
//                           stdio detached (ignored), and write its pid to FILE
//   [[cli:grandchild-keeps-pipes]]  ... the grandchild inherits stdout/stderr instead, so the
//                           pipes stay open after the leader exits
//   [[cli:exit-leaving-grandchild]] with a grandchild: print the output and exit 0 at once
//   [[cli:setsid-grandchild:FILE]]  spawn a long-lived node grandchild in a session of its own
//                           (setsid: out of the process group, as Gemini CLI runs its shell
//                           commands), its environment inherited, and write its pid to FILE;
//                           [[cli:setsid-grandchild-bare:FILE]] the same with an empty environment
//   [[cli:flood:MB]]        print MB megabytes of valid-looking JSONL noise after the first line
//                           and before the rest (which ends with the result)
//   [[cli:malformed]]       a non-JSON line instead of the final (result) line, exit 0
//   [[cli:truncated]]       the first half of the final line (no newline), exit 0
//   [[cli:echo-env:NAME]]   the answer text is the value of env NAME ('' when unset)
//   [[cli:stderr:TEXT]]     write TEXT (and a newline) to stderr
//   [[cli:exit:N]]          exit code N after the normal output
//   [[cli:usage:IN:OUT]]    codex: report IN input and OUT output tokens (codex reports the
//                           thread's running totals, so a resumed turn's include the turns before)
//   [[cli:turns:N:MS]]      before the answer, N tool-call turns MS ms apart, each written as it
//                           happens (codex: a command_execution item; copilot: an
//                           assistant.turn_start ... turn_end; claude: a tool_use message with
//                           usage), so a budget followed live can stop the run mid-way
//   [[cli:write:FILE=TEXT]] write TEXT (and a newline) to FILE, relative to the working folder
//                           (folders made), first thing (before a hang); several may be given
//   [[cli:commit:MESSAGE]]  then commit everything in the working folder's repository (git add
//                           --all, git commit), as an agent that commits its own work
//   [[cli:ask:...]] and the other channel directives: see fake-parent.mjs
//   [[cli:drive-daemon:DIR]]  the answer is what drive-daemon.mjs, run with an empty environment,
//                           got from the project's daemon as an agent would (DIR holds daemon.json
//                           and http-token); [[cli:drive-detached]]: after leaving its process tree
//   [[cli:read:PATH]] [[cli:try-write:PATH]] [[cli:list:DIR]] [[cli:connect:HOST:PORT]]
//   [[cli:git:ARGS]] [[cli:plant-link:NAME=TARGET]]  attempts (any number): the answer is JSON
//                           {"<key>:<value>": "ok" | "ok: <text>" | the error code (git: its
//                           stderr's first line)}, e.g. what a sandbox lets it reach; git runs in
//                           the working folder, ARGS split on spaces; plant-link replaces the file
//                           NAME of the folder its stdout is written in (the run's folder) with a
//                           link to TARGET
//
// Env FAKE_CLI_RECORD=<dir>: write <dir>/<pid>.json with {name, argv, cwd, env, prompt, files}; env
// holds CLAUDECODE, IS_SANDBOX and every name in FAKE_CLI_RECORD_ENV (comma-separated), null
// when unset. The record is written once the prompt is read and the SIGTERM handler (if any)
// is installed, so a test can wait for it as a "ready" signal.
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { connect } from 'node:net';
import { basename, dirname, join } from 'node:path';

const NAMES = ['claude', 'codex', 'copilot', 'gemini'];

let args = process.argv.slice(2);
let name;
if (NAMES.includes(args[0])) {
  name = args[0];
  args = args.slice(1);
} else if (process.env.FAKE_CLI_AS) {
  name = process.env.FAKE_CLI_AS;
} else {
  name = basename(process.argv[1] ?? '').replace(/\.[cm]?js$/, '');
}
if (!NAMES.includes(name)) {
  process.stderr.write(`fake-cli: cannot tell which CLI to play (got "${name}"); set FAKE_CLI_AS\n`);
  process.exit(2);
}

// `--version` (what `polyspawn doctor` runs): answers at once without reading stdin, like the
// real CLIs; env FAKE_CLI_VERSION=fail makes it fail, =hang makes it never answer.
if (args.includes('--version')) {
  if (process.env.FAKE_CLI_VERSION === 'hang') setInterval(() => {}, 1 << 30);
  else if (process.env.FAKE_CLI_VERSION === 'fail') {
    process.stderr.write(`fake-cli: ${name} is broken\n`);
    process.exit(3);
  } else {
    process.stdout.write(`0.0.0-fake (${name})\n`);
    process.exit(0);
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const prompt = Buffer.concat(chunks).toString('utf8');

const directives = [];
for (const m of prompt.matchAll(/\[\[cli:([a-z-]+)(?::(.*?))?\]\]/g)) directives.push({ key: m[1], value: m[2] ?? '' });
const has = (key) => directives.some((d) => d.key === key);
const valueOf = (key) => directives.find((d) => d.key === key)?.value;

if (has('ignore-term')) process.on('SIGTERM', () => {});

record();
// Before anything else (a hang included): a test can wait for the file, then kill.
writeFiles();

const stderrText = valueOf('stderr');
if (stderrText !== undefined) process.stderr.write(stderrText + '\n');

const grandchildFile = valueOf('grandchild');
if (grandchildFile !== undefined) {
  // Not detached: it stays in our process group, as a tool the CLI started would.
  const gc = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], {
    stdio: has('grandchild-keeps-pipes') ? ['ignore', 'inherit', 'inherit'] : 'ignore',
  });
  writeAtomically(grandchildFile, String(gc.pid));
  gc.unref();
}

for (const [key, env] of [
  ['setsid-grandchild', process.env],
  ['setsid-grandchild-bare', {}],
]) {
  const file = valueOf(key);
  if (file === undefined) continue;
  // detached: setsid(), a session and a process group of its own.
  const gc = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], {
    detached: true,
    stdio: 'ignore',
    env,
  });
  writeAtomically(file, String(gc.pid));
  gc.unref();
}

if (has('hang') || has('ignore-term') || (grandchildFile !== undefined && !has('exit-leaving-grandchild'))) {
  setInterval(() => {}, 1 << 30);
} else {
  await main();
}

async function main() {
  const sleepMs = valueOf('sleep');
  if (sleepMs !== undefined) await new Promise((r) => setTimeout(r, Number(sleepMs)));

  const echoName = valueOf('echo-env');
  const talks = ['ask', 'ask-many', 'progress', 'probe', 'save-token', 'team'].some(has);
  const attempts = directives.filter((d) => isAttempt(d.key));
  const driven = valueOf('drive-daemon');
  const answer = driven
    ? execFileSync(
        process.execPath,
        [new URL('drive-daemon.mjs', import.meta.url).pathname, driven, ...(has('drive-detached') ? ['--detach'] : [])],
        {
          env: {},
          encoding: 'utf8',
        },
      )
    : talks
      ? await (await import('./fake-parent.mjs')).talkToParent({ name, args, env: process.env, valueOf, prompt })
      : attempts.length
        ? JSON.stringify(await tryAll(attempts))
        : echoName !== undefined
          ? (process.env[echoName] ?? '')
          : `FAKE ${name}: ${prompt}`;
  const failed = has('fail') || valueOf('fail-as') === name;
  const { lines, exitCode, stderr } = { claude, codex, copilot, gemini }[name](answer, failed);

  if (stderr) process.stderr.write(stderr);
  if (lines.length > 0 && has('malformed'))
    lines[lines.length - 1] = 'this is not JSON: the fake CLI was told to be malformed';
  let out = lines.join('\n') + (lines.length > 0 ? '\n' : '');
  if (lines.length > 0 && has('truncated')) {
    const last = lines[lines.length - 1];
    out = [...lines.slice(0, -1), ''].join('\n') + last.slice(0, Math.floor(last.length / 2));
  }
  const turns = valueOf('turns');
  if (turns !== undefined && lines.length > 0) {
    // After the stream's opening lines (codex's thread and turn start, copilot's session
    // events, claude's init), before the answer.
    const [count, ms] = turns.split(':').map(Number);
    const split = { codex: 2, copilot: 2, claude: 1, gemini: 2 }[name];
    await write(process.stdout, lines.slice(0, split).join('\n') + '\n');
    for (let i = 1; i <= count; i++) {
      await new Promise((r) => setTimeout(r, ms));
      await write(process.stdout, toolTurn(i).join('\n') + '\n');
    }
    out = out.slice(lines.slice(0, split).join('\n').length + 1);
  }
  const flood = valueOf('flood');
  if (flood !== undefined) {
    // The noise goes after the first line (codex's thread.started, claude's init) when there
    // are several, so the head still starts like the real stream and the tail ends with it.
    const split = lines.length > 1 ? out.indexOf('\n') + 1 : 0;
    await write(process.stdout, out.slice(0, split));
    await writeNoise(Number(flood) * 1024 * 1024);
    out = out.slice(split);
  }
  await write(process.stdout, out);

  const exit = valueOf('exit');
  // Let the event loop end on its own: process.exit() could cut off output still queued
  // for the pipe.
  process.exitCode = exit !== undefined ? Number(exit) : has('malformed') || has('truncated') ? 0 : exitCode;
}

/** One tool-call turn in the CLI's own stream shape (for [[cli:turns:N:MS]]). */
function toolTurn(i) {
  const command = `echo turn ${i}`;
  if (name === 'codex') {
    const item = { id: `item_t${i}`, type: 'command_execution', command, aggregated_output: '', exit_code: null };
    return [
      JSON.stringify({ type: 'item.started', item: { ...item, status: 'in_progress' } }),
      JSON.stringify({ type: 'item.completed', item: { ...item, aggregated_output: `turn ${i}\n`, exit_code: 0 } }),
    ];
  }
  if (name === 'gemini') {
    const toolId = `run_shell_command__run_shell_command_${i}`;
    const parameters = { command, description: 'fake tool call' };
    return [
      JSON.stringify({ type: 'tool_use', tool_name: 'run_shell_command', tool_id: toolId, parameters }),
      JSON.stringify({ type: 'tool_result', tool_id: toolId, status: 'success', output: `turn ${i}` }),
    ];
  }
  if (name === 'copilot') {
    const turnId = `t${i}`;
    return [
      JSON.stringify({ type: 'assistant.turn_start', data: { turnId }, id: randomUUID() }),
      JSON.stringify({
        type: 'tool.execution_start',
        data: { toolCallId: `call_${i}`, toolName: 'bash', arguments: { command }, turnId },
      }),
      JSON.stringify({ type: 'assistant.turn_end', data: { turnId }, id: randomUUID() }),
    ];
  }
  const usage = { input_tokens: 12, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const content = [{ type: 'tool_use', id: `toolu_${i}`, name: 'Bash', input: { command } }];
  return [JSON.stringify({ type: 'assistant', message: { id: `msg_t${i}`, role: 'assistant', content, usage } })];
}

// --- claude -------------------------------------------------------------------------------

function claude(answer, failed) {
  const format = option(['--output-format']) ?? 'text';
  const sessionId = option(['--resume', '-r', '--session-id']) ?? randomUUID();
  const model = option(['--model']) ?? 'claude-opus-5-5';
  if (!args.includes('-p') && !args.includes('--print')) {
    return { lines: [], exitCode: 1, stderr: 'fake-cli: claude without -p would start an interactive session\n' };
  }
  if (format === 'stream-json' && !args.includes('--verbose')) {
    return {
      lines: [],
      exitCode: 1,
      stderr: 'Error: When using --print, --output-format=stream-json requires --verbose\n',
    };
  }
  const usage = {
    input_tokens: failed ? 0 : 12,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: failed ? 0 : 7,
    server_tool_use: { web_search_requests: 0, web_fetch_requests: 0 },
    service_tier: 'standard',
  };
  const cost = failed ? 0 : 0.000188;
  const text = failed ? 'Failed to authenticate. API Error: 401 fake error 401' : answer;
  const result = {
    type: 'result',
    subtype: 'success', // still "success" on an API error: is_error is what tells
    is_error: failed,
    duration_ms: 127,
    duration_api_ms: 20,
    num_turns: 1,
    result: text,
    stop_reason: failed ? 'stop_sequence' : 'end_turn',
    session_id: sessionId,
    total_cost_usd: cost,
    usage,
    modelUsage: failed
      ? {}
      : {
          [model]: {
            inputTokens: 12,
            outputTokens: 7,
            cacheReadInputTokens: 0,
            cacheCreationInputTokens: 0,
            webSearchRequests: 0,
            costUSD: cost,
            contextWindow: 1000000,
            maxOutputTokens: 128000,
          },
        },
    permission_denials: [],
    terminal_reason: failed ? 'api_error' : 'completed',
    api_error_status: failed ? 401 : null,
    ...(failed ? { api_error_type: 'authentication_error' } : {}),
    uuid: randomUUID(),
  };
  const exitCode = failed ? 1 : 0;
  if (format === 'json') return { lines: [JSON.stringify(result)], exitCode };
  if (format === 'stream-json') {
    const init = {
      type: 'system',
      subtype: 'init',
      cwd: process.cwd(),
      session_id: sessionId,
      tools: ['Bash', 'Edit', 'Read', 'Write'],
      mcp_servers: [],
      model,
      permissionMode: option(['--permission-mode']) ?? 'default',
      apiKeySource: 'ANTHROPIC_API_KEY',
      claude_code_version: '2.1.332',
      uuid: randomUUID(),
    };
    const lines = [JSON.stringify(init)];
    if (!failed) {
      const message = {
        id: 'msg_fake_1',
        type: 'message',
        role: 'assistant',
        model,
        content: [{ type: 'text', text: answer }],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 12, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      };
      lines.push(
        JSON.stringify({
          type: 'assistant',
          message,
          parent_tool_use_id: null,
          session_id: sessionId,
          uuid: randomUUID(),
        }),
      );
    }
    lines.push(JSON.stringify(result));
    return { lines, exitCode };
  }
  // text: the answer alone; errors are printed the same way.
  return { lines: [text], exitCode };
}

// --- codex --------------------------------------------------------------------------------

function codex(answer, failed) {
  const execAt = args.indexOf('exec');
  if (execAt < 0)
    return { lines: [], exitCode: 1, stderr: 'fake-cli: codex without exec would start an interactive session\n' };
  const positionals = codexPositionals(args.slice(execAt + 1));
  let threadId = randomUUID();
  if (positionals[0] === 'resume' && positionals[1] && positionals[1] !== '-') threadId = positionals[1];
  const json = args.includes('--json');
  const [tokensIn, tokensOut] = (valueOf('usage') ?? '12:7').split(':').map(Number);
  const message = 'unexpected status 401 Unauthorized: fake error 401, url: http://127.0.0.1:9/v1/responses';
  const events = failed
    ? [
        { type: 'thread.started', thread_id: threadId },
        { type: 'turn.started' },
        { type: 'error', message },
        { type: 'turn.failed', error: { message } },
      ]
    : [
        { type: 'thread.started', thread_id: threadId },
        { type: 'turn.started' },
        { type: 'item.completed', item: { id: 'item_0', type: 'agent_message', text: answer } },
        {
          type: 'turn.completed',
          usage: {
            input_tokens: tokensIn,
            cached_input_tokens: 0,
            cache_write_input_tokens: 0,
            output_tokens: tokensOut,
            reasoning_output_tokens: 0,
          },
        },
      ];
  const lastMessageFile = option(['--output-last-message', '-o']);
  if (lastMessageFile && !failed) writeFileSync(lastMessageFile, answer);
  if (json) return { lines: events.map((e) => JSON.stringify(e)), exitCode: failed ? 1 : 0 };
  return failed ? { lines: [], exitCode: 1, stderr: `ERROR: ${message}\n` } : { lines: [answer], exitCode: 0 };
}

/** The positional arguments of `codex exec ...`, skipping the options that take a value. */
function codexPositionals(rest) {
  const takesValue = new Set([
    '-c',
    '--config',
    '-m',
    '--model',
    '--enable',
    '--disable',
    '-i',
    '--image',
    '--output-schema',
    '-o',
    '--output-last-message',
    '-C',
    '--cd',
    '-s',
    '--sandbox',
    '-p',
    '--profile',
    '--color',
    '--add-dir',
    '--local-provider',
  ]);
  const out = [];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    if (a === '--') return [...out, ...rest.slice(i + 1)];
    if (a === '-') out.push(a);
    else if (a.startsWith('-')) {
      if (takesValue.has(a)) i++;
    } else out.push(a);
  }
  return out;
}

// --- copilot ------------------------------------------------------------------------------

function copilot(answer, failed) {
  const json = option(['--output-format']) === 'json';
  const sessionId = option(['--resume', '-r']) ?? randomUUID();
  const model = option(['--model']) ?? process.env.COPILOT_MODEL ?? 'gpt-5.4';
  const now = () => new Date().toISOString();
  const event = (type, data, extra = {}) =>
    JSON.stringify({ type, data, ...extra, id: randomUUID(), timestamp: now(), parentId: randomUUID() });
  const interactionId = randomUUID();
  const messageId = randomUUID();
  const lines = [
    event('session.tools_updated', { model }, { ephemeral: true }),
    event('user.message', { content: prompt, messageId: randomUUID(), interactionId, turnId: '0' }),
    event('assistant.turn_start', { turnId: '0', interactionId }),
  ];
  // No real failing copilot sample is on file: this is a plausible shape (an error event,
  // then the usual final result with a non-zero exitCode).
  const errorText = 'Authentication failed (Request ID: fake): 401 fake error 401';
  if (failed) {
    lines.push(event('session.error', { errorType: 'authentication', message: errorText, statusCode: 401 }));
  } else {
    lines.push(
      event('assistant.message_delta', { messageId, deltaContent: answer }, { ephemeral: true }),
      event('assistant.message', { messageId, model, content: answer, toolRequests: [], interactionId, turnId: '0' }),
      event('assistant.turn_end', { turnId: '0' }),
    );
  }
  const exitOverride = valueOf('exit');
  const exitCode = failed ? 1 : 0;
  const reported = exitOverride !== undefined ? Number(exitOverride) : exitCode; // copilot reports its own exit code
  lines.push(
    JSON.stringify({
      type: 'result',
      timestamp: now(),
      sessionId,
      exitCode: reported,
      usage: {
        premiumRequests: failed ? 0 : 1,
        totalApiDurationMs: 22,
        sessionDurationMs: 223,
        codeChanges: { linesAdded: 0, linesRemoved: 0, filesModified: [] },
      },
    }),
  );

  const usageFile = option(['--usage-output-file']);
  if (usageFile) {
    const tokens = {
      inputTokens: failed ? 0 : 12,
      outputTokens: failed ? 0 : 7,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    };
    const metrics = { requests: { count: failed ? 0 : 1, cost: failed ? 0 : 1 }, usage: tokens, totalNanoAiu: 0 };
    const usage = {
      totalPremiumRequestCost: failed ? 0 : 1,
      totalUserRequests: 1,
      totalNanoAiu: 0,
      aiCreditsStatus: 'unavailable',
      totalApiDurationMs: 19,
      sessionStartTime: now(),
      codeChanges: { linesAdded: 0, linesRemoved: 0, filesModifiedCount: 0, filesModified: [] },
      modelMetrics: { [model]: { ...metrics, aiCreditsStatus: 'unavailable' } },
      agentMetrics: { main: { totalApiDurationMs: 19, totalNanoAiu: 0, modelMetrics: { [model]: metrics } } },
      currentModel: model,
      lastCallInputTokens: tokens.inputTokens,
      lastCallOutputTokens: tokens.outputTokens,
    };
    writeFileSync(usageFile, JSON.stringify(usage, null, 2) + '\n');
  }
  if (json) return { lines, exitCode };
  return failed ? { lines: [], exitCode, stderr: `Error: ${errorText}\n` } : { lines: [answer], exitCode };
}

// --- gemini -------------------------------------------------------------------------------

/**
 * Gemini CLI 0.61.0's `-o stream-json` (test/fixtures/cli-samples/gemini-*): its router's model
 * and the turn's model each 12/7 tokens; a failure is an API error's result record, exit 145.
 */
function gemini(answer, failed) {
  if (!args.includes('-p') && !args.includes('--prompt')) {
    return { lines: [], exitCode: 1, stderr: 'fake-cli: gemini without -p would start an interactive session\n' };
  }
  const now = () => new Date().toISOString();
  const sessionId = option(['--resume', '-r', '--session-id']) ?? randomUUID();
  const turnModel =
    { pro: 'gemini-3.1-pro-preview', flash: 'gemini-3.8-flash' }[option(['--model', '-m'])] ?? 'gemini-3.8-flash';
  const tokens = (n) => ({
    total_tokens: 19 * n,
    input_tokens: 12 * n,
    output_tokens: 7 * n,
    cached: 0,
    input: 12 * n,
  });
  const models = { 'gemini-3.5-flash-lite': tokens(1), [turnModel]: tokens(failed ? 0 : 1) };
  const stats = { ...tokens(failed ? 1 : 2), duration_ms: 20, tool_calls: 0, models };
  const lines = [
    { type: 'init', timestamp: now(), session_id: sessionId, model: 'auto' },
    { type: 'message', timestamp: now(), role: 'user', content: prompt },
  ];
  if (failed) {
    const message = '[API Error: {"error":{"code":401,"message":"fake error 401","status":"UNAUTHENTICATED"}}]';
    lines.push({ type: 'result', timestamp: now(), status: 'error', error: { type: 'unknown', message }, stats });
    return { lines: lines.map((l) => JSON.stringify(l)), exitCode: 145 };
  }
  const cut = Math.ceil(answer.length / 2);
  for (const part of [answer.slice(0, cut), answer.slice(cut)]) {
    if (part) lines.push({ type: 'message', timestamp: now(), role: 'assistant', content: part, delta: true });
  }
  lines.push({ type: 'result', timestamp: now(), status: 'success', stats });
  return { lines: lines.map((l) => JSON.stringify(l)), exitCode: 0 };
}

// --- helpers ------------------------------------------------------------------------------

/** The value of the first of `names` given as `--name value` or `--name=value`. */
function option(names) {
  for (let i = 0; i < args.length; i++) {
    for (const n of names) {
      if (args[i] === n && i + 1 < args.length && !args[i + 1].startsWith('-')) return args[i + 1];
      if (n.startsWith('--') && args[i].startsWith(n + '=')) return args[i].slice(n.length + 1);
    }
  }
  return undefined;
}

function record() {
  const dir = process.env.FAKE_CLI_RECORD;
  if (!dir) return;
  const names = [
    'CLAUDECODE',
    'IS_SANDBOX',
    ...(process.env.FAKE_CLI_RECORD_ENV ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  ];
  const env = Object.fromEntries(names.map((n) => [n, process.env[n] ?? null]));
  // The files its arguments name (an output schema, an MCP config): polyspawn removes them when the run ends.
  const files = {};
  for (const arg of args) {
    const path = arg.replace(/^@/, '');
    if (path.startsWith('/') && existsSync(path) && statSync(path).isFile()) files[path] = readFileSync(path, 'utf8');
  }
  writeAtomically(
    join(dir, `${process.pid}.json`),
    JSON.stringify({ name, argv: args, cwd: process.cwd(), env, prompt, files }),
  );
}

/** [[cli:write:FILE=TEXT]] and [[cli:commit:MESSAGE]]: an agent's edits, in its working folder. */
function writeFiles() {
  for (const d of directives.filter((d) => d.key === 'write')) {
    const at = d.value.indexOf('=');
    const file = join(process.cwd(), d.value.slice(0, at));
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, d.value.slice(at + 1) + '\n');
  }
  const message = valueOf('commit');
  if (message === undefined) return;
  const identity = ['-c', 'user.name=fake agent', '-c', 'user.email=agent@example.com'];
  execFileSync('git', ['add', '--all'], { stdio: 'ignore' });
  execFileSync('git', [...identity, 'commit', '--no-verify', '-q', '-m', message], { stdio: 'ignore' });
}

function writeAtomically(path, text) {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

function write(stream, data) {
  return new Promise((resolve, reject) => stream.write(data, (err) => (err ? reject(err) : resolve())));
}

/** `bytes` of JSONL noise in the CLI's own event shapes, written fast and with backpressure. */
async function writeNoise(bytes) {
  const noise =
    name === 'claude'
      ? {
          type: 'stream_event',
          event: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: '' } },
          session_id: 'noise',
        }
      : name === 'codex'
        ? { type: 'item.completed', item: { id: 'item_noise', type: 'reasoning', text: '' } }
        : { type: 'assistant.message_delta', data: { messageId: 'noise', deltaContent: '' }, ephemeral: true };
  const filler = 'x'.repeat(1000);
  if (noise.event) noise.event.delta.text = filler;
  else if (noise.item) noise.item.text = filler;
  else noise.data.deltaContent = filler;
  const line = JSON.stringify(noise) + '\n';
  // Whole lines only, at least `bytes` of them, in blocks of about 1 MB.
  const perBlock = Math.max(1, Math.floor((1 << 20) / line.length));
  const block = Buffer.from(line.repeat(perBlock));
  let lines = Math.ceil(bytes / line.length);
  while (lines > 0) {
    const n = Math.min(lines, perBlock);
    lines -= n;
    const piece = n === perBlock ? block : block.subarray(0, n * line.length);
    if (!process.stdout.write(piece)) await new Promise((r) => process.stdout.once('drain', r));
  }
}

/** What an attempt directive does (a function: main() runs before the module's constants exist); a short text when it works. */
function attempt(key, value) {
  switch (key) {
    case 'read':
      return readFileSync(value, 'utf8').trim();
    case 'try-write':
      return (writeFileSync(value, 'written by the fake CLI\n'), '');
    case 'list':
      return readdirSync(value).sort().join(',');
    case 'plant-link': {
      const [file, target] = value.split('=');
      const path = join(dirname(readlinkSync('/proc/self/fd/1')), file);
      rmSync(path, { force: true });
      return (symlinkSync(target, path), '');
    }
    case 'git':
      try {
        return execFileSync('git', value.split(' '), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
      } catch (error) {
        throw new Error(String(error.stderr).trim().split('\n')[0]);
      }
    case 'connect':
      return new Promise((resolve, reject) => {
        const [host, port] = value.split(/:(?=\d+$)/);
        const socket = connect({ host, port: Number(port), timeout: 5000 });
        socket.once('connect', () => (socket.destroy(), resolve('')));
        socket.once(
          'timeout',
          () => (socket.destroy(), reject(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }))),
        );
        socket.once('error', reject);
      });
  }
}
function isAttempt(key) {
  return ['read', 'try-write', 'list', 'connect', 'git', 'plant-link'].includes(key);
}

async function tryAll(attempts) {
  const results = {};
  for (const { key, value } of attempts) {
    try {
      const text = await attempt(key, value);
      results[`${key}:${value}`] = text ? `ok: ${text}` : 'ok';
    } catch (error) {
      results[`${key}:${value}`] = error.code ?? error.message;
    }
  }
  return results;
}
