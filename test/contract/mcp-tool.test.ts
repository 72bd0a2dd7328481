// The real claude, codex and copilot CLIs, run directly (not through polyspawn), call a tool of an
// MCP server over Streamable HTTP with a bearer token: the way polyspawn's `parent` channel is
// wired into them (FINDINGS.md, "MCP tools over HTTP"). The fake model API's
// [[fake:mcp:parent:ask_parent:{...}]] directive makes each model call ask_parent; the server
// must see the call with its arguments, and the CLI's final answer must carry the tool's result.
// The token stays out of argv and files: each CLI reads it from PARENT_TOKEN.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { FakeModelApi } from '../fakes/model-api.js';
import { cliEnv, runCli, startCliSetup, type CliHomes, type CliSetup, type InstalledClis } from './clis.js';
import { PARENT_ANSWER, startParentMcp, type ParentMcp } from './parent-mcp.js';

let setup: CliSetup | undefined;
let clis: InstalledClis;
let api: FakeModelApi;
let homes: CliHomes;
let project: string;
/** The channel servers the running test started. */
let servers: ParentMcp[] = [];

beforeAll(async () => {
  setup = await startCliSetup();
  ({ clis, api, homes, project } = setup);
}, 900_000);

afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

afterAll(async () => {
  await setup?.close();
});

/** A fresh channel server with its own token, and the prompt that makes the model ask it. */
async function channel(options: { readOnlyHint?: boolean } = {}) {
  const server = await startParentMcp(randomBytes(16).toString('hex'), options);
  servers.push(server);
  const mark = `mcp-${Date.now()}-${randomBytes(3).toString('hex')}`;
  // Spaces, colons, brackets and `]]` inside the JSON: the directive must still parse.
  const args = { question: `${mark}: red (warm) or blue [[cool]]?`, options: ['red', 'blue'] };
  return { server, args, prompt: `Ask first. [[fake:mcp:parent:ask_parent:${JSON.stringify(args)}]]` };
}

/** The fake model API's steps for one prompt: 'mcp-search', 'mcp' (the call), 'tool-result'. */
const steps = (question: string) => api.requests.filter((r) => r.rawBody.includes(question)).map((r) => r.outcome);

/** What a Host and Origin check on the channel sees: loopback Host with the port, no Origin. */
function expectLoopbackHeaders(server: ParentMcp): void {
  const { host } = new URL(server.url);
  expect(server.headers.length).toBeGreaterThan(0);
  for (const h of server.headers) expect({ host: h.host, origin: h.origin }).toEqual({ host, origin: undefined });
}

/** What ask_parent answered to the first call, as the CLI's final answer must quote it. */
const firstResult = JSON.stringify({ message_id: 'm1', status: 'answered', answer: PARENT_ANSWER });

/** Runs a CLI in the project with the prompt on stdin and the fake's environment (and `extraEnv`). */
const run = (bin: string, args: string[], prompt: string, token: string, extraEnv = {}) =>
  runCli(bin, args, prompt, project, cliEnv({ ...homes.env, PARENT_TOKEN: token, ...extraEnv }));

type Line = Record<string, unknown> & { type?: string };
const jsonLines = (text: string): Line[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);

/**
 * The `mcpServers` file claude and copilot read. Both expand `${PARENT_TOKEN}` from their
 * environment, and both take `timeout` (ms) as the one tool call's limit.
 */
function serverFile(server: ParentMcp, extra: Record<string, unknown> = {}): string {
  const file = join(mkdtempSync(join(homes.dir, 'mcp-')), 'mcp.json');
  const entry = {
    type: 'http',
    url: server.url,
    headers: { Authorization: 'Bearer ${PARENT_TOKEN}' },
    timeout: 120_000,
    ...extra,
  };
  writeFileSync(file, JSON.stringify({ mcpServers: { parent: entry } }));
  return file;
}

// ---------------------------------------------------------------------------------------------
// claude: --mcp-config; ToolSearch first (MCP tools are deferred unless the server entry says
// alwaysLoad), then mcp__parent__ask_parent.

const claude = async (server: ParentMcp, prompt: string, extra: string[], entry: Record<string, unknown> = {}) => {
  const config = serverFile(server, entry);
  const args = ['-p', '--output-format', 'json', '--mcp-config', config, '--strict-mcp-config', ...extra];
  const result = await run(clis.claude, args, prompt, server.token);
  const out = JSON.parse(result.stdout) as {
    result: string;
    permission_denials: { tool_name: string }[];
  };
  return { ...result, answer: out.result, denied: out.permission_denials.map((d) => d.tool_name) };
};

describe('claude 2.1.332', () => {
  const deferred = ['mcp-search', 'mcp', 'tool-result'];
  test.each([
    ['--permission-mode acceptEdits', 'acceptEdits', {}, deferred],
    ['--permission-mode dontAsk', 'dontAsk', {}, deferred],
    [
      '"alwaysLoad": true in the entry (offered at once, no ToolSearch)',
      'acceptEdits',
      { alwaysLoad: true },
      ['mcp', 'tool-result'],
    ],
  ])(
    '%s, --allowedTools mcp__parent: ask_parent is called; the answer carries its result',
    async (_, mode, entry, path) => {
      const { server, args, prompt } = await channel();
      const done = await claude(server, prompt, ['--permission-mode', mode, '--allowedTools', 'mcp__parent'], entry);
      expect(done.code, done.stderr).toBe(0);
      expect(server.calls).toEqual([args]);
      expect(done.answer).toBe(`TOOL_RESULT: ${firstResult}`);
      expect(steps(args.question)).toEqual(path);
      expectLoopbackHeaders(server);
    },
  );

  test('without --allowedTools, acceptEdits denies the call, even for a tool marked read-only', async () => {
    const { server, prompt } = await channel({ readOnlyHint: true });
    const done = await claude(server, prompt, ['--permission-mode', 'acceptEdits']);
    expect(done.denied).toEqual(['mcp__parent__ask_parent']);
    expect(server.calls).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// codex: -c mcp_servers.parent.*; the token's variable named by bearer_token_env_var.

const codexChannel = (server: ParentMcp, approve: boolean) => [
  '-c',
  `mcp_servers.parent.url=${JSON.stringify(server.url)}`,
  '-c',
  'mcp_servers.parent.bearer_token_env_var="PARENT_TOKEN"',
  '-c',
  'mcp_servers.parent.tool_timeout_sec=120',
  '-c',
  'mcp_servers.parent.required=true',
  ...(approve ? ['-c', 'mcp_servers.parent.default_tools_approval_mode="approve"'] : []),
];

const codex = async (server: ParentMcp, prompt: string, args: string[], extraEnv = {}) => {
  const result = await run(clis.codex, args, prompt, server.token, extraEnv);
  const items = jsonLines(result.stdout).flatMap((l) => (l.type === 'item.completed' ? [l.item as Line] : []));
  const answer = items.findLast((i) => i.type === 'agent_message')?.text;
  const toolCall = items.find((i) => i.type === 'mcp_tool_call') as { error?: { message: string } | null } | undefined;
  return { ...result, answer, toolCall, threadId: jsonLines(result.stdout)[0]?.thread_id as string };
};

const codexExec = (model: string, server: ParentMcp, extra: string[], approve = true) => [
  'exec',
  '--json',
  '--skip-git-repo-check',
  '-m',
  model,
  ...codexChannel(server, approve),
  ...extra,
  '-',
];

describe('codex 0.169.0', () => {
  test.each([
    ['gpt-5.5 (in the catalog: tool_search first)', 'gpt-5.5', ['mcp-search', 'mcp', 'tool-result']],
    ['a model outside the catalog (a namespace tool mcp__parent)', 'fake-model', ['mcp', 'tool-result']],
  ])('%s, read-only sandbox, approval mode "approve"', async (_, model, path) => {
    const { server, args, prompt } = await channel();
    const done = await codex(server, prompt, codexExec(model, server, ['--sandbox', 'read-only']));
    expect(done.code, done.stderr).toBe(0);
    expect(server.calls).toEqual([args]);
    expect(done.answer).toContain(firstResult);
    expect(steps(args.question)).toEqual(path);
    expectLoopbackHeaders(server);
  });

  test('workspace-write with the approval mode, and the bypass flag without it, call the tool', async () => {
    const { server, prompt } = await channel();
    const sandboxed = await codex(server, prompt, codexExec('gpt-5.5', server, ['--sandbox', 'workspace-write']));
    expect(sandboxed.answer).toContain(firstResult);
    const bypass = ['--dangerously-bypass-approvals-and-sandbox'];
    const bypassed = await codex(server, prompt, codexExec('gpt-5.5', server, bypass, false));
    expect(bypassed.answer).toContain(JSON.stringify({ message_id: 'm2', status: 'answered', answer: PARENT_ANSWER }));
    expect(server.calls).toHaveLength(2);
  });

  test('without the approval mode the call is refused ("requires approval"), unless the tool is read-only', async () => {
    const { server, prompt } = await channel();
    const refused = await codex(server, prompt, codexExec('gpt-5.5', server, ['--sandbox', 'workspace-write'], false));
    expect(refused.toolCall?.error?.message).toMatch(/requires approval/);
    expect(server.calls).toEqual([]);

    const readOnly = await channel({ readOnlyHint: true });
    const allowed = await codex(
      readOnly.server,
      readOnly.prompt,
      codexExec('gpt-5.5', readOnly.server, ['--sandbox', 'read-only'], false),
    );
    expect(allowed.answer).toContain(firstResult);
    expect(readOnly.server.calls).toEqual([readOnly.args]);
  });

  // How polyspawn gives a codex agent its MCP servers' secrets: values in codex's environment,
  // only the variables' names in argv. `settings`: the `parent` server's, key=value.
  const parentServer = (settings: string[]) => [
    'exec',
    '--json',
    '--skip-git-repo-check',
    '-m',
    'gpt-5.5',
    // required: exec waits for the server's tools before its first turn (else, under load, the
    // model may not see them: docs/commands.md).
    ...[...settings, 'default_tools_approval_mode="approve"', 'required=true'].flatMap((s) => [
      '-c',
      `mcp_servers.parent.${s}`,
    ]),
    '--sandbox',
    'read-only',
    '-',
  ];

  test('env_http_headers: the Authorization header from a variable reaches an HTTP server', async () => {
    const { server, args, prompt } = await channel();
    const viaHeader = parentServer([
      `url=${JSON.stringify(server.url)}`,
      'env_http_headers={"Authorization" = "POLYSPAWN_MCP_PARENT_SECRET_1"}',
    ]);
    const done = await codex(server, prompt, viaHeader, { POLYSPAWN_MCP_PARENT_SECRET_1: `Bearer ${server.token}` });
    expect(done.code, done.stderr).toBe(0);
    expect(server.calls).toEqual([args]);
    expect(done.answer).toContain(firstResult);
  });

  test("env_vars: a stdio server gets the named variable from codex's environment, and no other", async () => {
    const { server, prompt } = await channel(); // only its prompt: the stdio server answers
    const script = join(mkdtempSync(join(homes.dir, 'stdio-')), 'echo-env.mjs');
    writeFileSync(script, echoEnvServer);
    const stdio = parentServer([
      `command=${JSON.stringify(process.execPath)}`,
      `args=[${JSON.stringify(script)}]`,
      'env_vars=["ECHO_SECRET"]',
    ]);
    const done = await codex(server, prompt, stdio, { ECHO_SECRET: 'echo-value-42', OTHER_SETTING: 'not-passed' });
    expect(done.code, done.stderr).toBe(0);
    expect(done.answer).toContain(JSON.stringify({ ECHO_SECRET: 'echo-value-42', OTHER_SETTING: null }));
  });

  test('exec resume takes the same -c settings (a new port and token for the resumed run)', async () => {
    const first = await channel();
    const started = await codex(first.server, 'hello', codexExec('gpt-5.5', first.server, []));
    expect(started.threadId).toBeTruthy();

    const { server, args, prompt } = await channel();
    const resumeArgs = codexExec('gpt-5.5', server, []);
    resumeArgs.splice(resumeArgs.length - 1, 0, started.threadId);
    resumeArgs.splice(1, 0, 'resume');
    const resumed = await codex(server, prompt, resumeArgs);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.threadId).toBe(started.threadId);
    expect(server.calls).toEqual([args]);
    expect(resumed.answer).toContain(firstResult);
  });
});

/** A stdio MCP server whose ask_parent answers with two variables of its environment. */
const echoEnvServer = `
import { McpServer } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/server/mcp.js'))};
import { StdioServerTransport } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/server/stdio.js'))};
const server = new McpServer({ name: 'parent', version: '0.0.0' });
server.registerTool('ask_parent', { description: 'Ask the orchestrator.', inputSchema: {} }, () => ({
  content: [{ type: 'text', text: JSON.stringify({
    ECHO_SECRET: process.env.ECHO_SECRET ?? null,
    OTHER_SETTING: process.env.OTHER_SETTING ?? null,
  }) }],
}));
await server.connect(new StdioServerTransport());
`;

// ---------------------------------------------------------------------------------------------
// copilot: --additional-mcp-config @file; the tool is offered as `parent-ask_parent`.

const copilot = async (server: ParentMcp, prompt: string, extra: string[]) => {
  const file = serverFile(server, { tools: ['*'] });
  const args = ['--output-format', 'json', '--model', 'gpt-5.4', '--additional-mcp-config', `@${file}`, ...extra];
  const result = await run(clis.copilot, args, prompt, server.token);
  const lines = jsonLines(result.stdout);
  const data = (type: string) => lines.filter((l) => l.type === type).map((l) => l.data as Record<string, unknown>);
  const answer = data('assistant.message').findLast((d) => d.content)?.content as string | undefined;
  return { ...result, answer, executions: data('tool.execution_complete') };
};

describe('copilot 1.0.102', () => {
  test.each([
    ['--allow-tool parent', ['--allow-tool', 'parent']],
    ['--allow-tool parent(ask_parent)', ['--allow-tool', 'parent(ask_parent)']],
    ['--allow-all-tools', ['--allow-all-tools']],
  ])('%s: parent-ask_parent is called; the answer carries its result', async (_, allow) => {
    const { server, args, prompt } = await channel();
    const done = await copilot(server, prompt, allow);
    expect(done.code, done.stderr).toBe(0);
    expect(server.calls).toEqual([args]);
    expect(done.answer).toBe(`TOOL_RESULT: ${firstResult}`);
    expect(steps(args.question)).toEqual(['mcp', 'tool-result']);
    expectLoopbackHeaders(server);
  });

  test('without an allow rule the call is denied, unless the tool is read-only', async () => {
    const { server, prompt } = await channel();
    const denied = await copilot(server, prompt, []);
    expect(denied.executions).toMatchObject([{ success: false, error: { code: 'denied' } }]);
    expect(server.calls).toEqual([]);

    const readOnly = await channel({ readOnlyHint: true });
    const allowed = await copilot(readOnly.server, readOnly.prompt, []);
    expect(allowed.answer).toBe(`TOOL_RESULT: ${firstResult}`);
  });
});
