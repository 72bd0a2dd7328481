// Which MCP era each real orchestrating CLI negotiates with polyspawn's own server, and that a
// tool call works in it: claude -p (by default, and with the legacy negotiation forced), codex
// exec and copilot -p each start `polyspawn serve` over stdio (the tap preloaded:
// test/contract/jsonrpc-tap.mjs), the fake model API makes the model call `list`, and the tap
// shows what the client sent first and how the call was answered. docs/ARCHITECTURE.md,
// "Protocol eras and tasks", states what these tests hold.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FakeModelApi } from '../fakes/model-api.js';
import { repoRoot, serverEntry } from '../helpers/mcp.js';
import { cliEnv, runCli, startCliSetup, type CliHomes, type CliSetup, type InstalledClis } from './clis.js';
import { readTap } from './interactive-claude.js';

let setup: CliSetup | undefined;
let clis: InstalledClis;
let api: FakeModelApi;
let homes: CliHomes;
let project: string;

beforeAll(async () => {
  setup = await startCliSetup();
  ({ clis, api, homes, project } = setup);
}, 900_000);

afterAll(async () => {
  await setup?.close();
});

const TAP = join(repoRoot, 'test', 'contract', 'jsonrpc-tap.mjs');

/** polyspawn's server as a stdio MCP server started by the CLI, its messages logged to `tapLog`. */
function agentsServer(tapLog: string) {
  return {
    command: process.execPath,
    args: ['--import', TAP, serverEntry, 'serve'],
    env: { JSONRPC_TAP_LOG: tapLog, XDG_CONFIG_HOME: join(homes.dir, 'xdg') },
  };
}

/** What the tap saw: the client's first request, the era it settled on, and the answered `list` call. */
function negotiated(tapLog: string) {
  const entries = readTap(tapLog);
  const requests = entries.filter(
    (e) => e.from === 'client' && typeof e.message === 'object' && e.message !== null && 'method' in e.message,
  );
  const method = (e: (typeof requests)[number]) => (e.message as { method: string }).method;
  const initialize = requests.find((e) => method(e) === 'initialize');
  const call = requests.find((e) => method(e) === 'tools/call');
  const callId = (call?.message as { id?: unknown } | undefined)?.id;
  const answer = entries.find((e) => e.from === 'server' && (e.message as { id?: unknown } | null)?.id === callId)
    ?.message as { result?: { isError?: boolean; content?: { text: string }[] } } | undefined;
  const meta = (call?.message as { params?: { _meta?: Record<string, unknown> } } | undefined)?.params?._meta;
  const capabilities = meta?.['io.modelcontextprotocol/clientCapabilities'] as
    { extensions?: Record<string, unknown> } | undefined;
  return {
    first: requests[0] ? method(requests[0]) : undefined,
    era: initialize
      ? (initialize.message as { params: { protocolVersion: string } }).params.protocolVersion
      : (meta?.['io.modelcontextprotocol/protocolVersion'] as string | undefined),
    called: (call?.message as { params?: { name?: string } } | undefined)?.params?.name,
    answered: answer?.result !== undefined && answer.result.isError !== true,
    /** Whether the call declared the tasks extension (so a spawn would become a task). */
    tasks: capabilities?.extensions?.['io.modelcontextprotocol/tasks'] !== undefined,
  };
}

/** A fresh tap log for one run. */
const tapLogFor = (name: string) => join(mkdtempSync(join(homes.dir, `tap-${name}-`)), 'tap.jsonl');

const PROMPT = 'What runs? [[fake:mcp:agents:list:{}]]';

const run = (bin: string, args: string[], extra: Record<string, string> = {}) =>
  runCli(bin, args, PROMPT, project, cliEnv({ ...homes.env, ...extra }));

function mcpFile(tapLog: string, entry: Record<string, unknown> = {}): string {
  const file = join(mkdtempSync(join(homes.dir, 'mcp-')), 'mcp.json');
  writeFileSync(file, JSON.stringify({ mcpServers: { agents: { type: 'stdio', ...agentsServer(tapLog), ...entry } } }));
  return file;
}

describe('the era each client negotiates with polyspawn serve over stdio, and a tool call in it', () => {
  test.each([
    ['by default', {}, 'server/discover', '2026-07-28'],
    ['with MCP_PROTOCOL_NEGOTIATION=legacy', { MCP_PROTOCOL_NEGOTIATION: 'legacy' }, 'initialize', '2025-11-25'],
  ])('claude -p 2.1.332 %s', async (_, extra, first, era) => {
    const tap = tapLogFor('claude');
    const args = ['-p', '--output-format', 'json', '--mcp-config', mcpFile(tap), '--strict-mcp-config'];
    const done = await run(clis.claude, [...args, '--allowedTools', 'mcp__agents'], extra);
    expect(done.code, done.stderr).toBe(0);
    expect(negotiated(tap)).toEqual({ first, era, called: 'list', answered: true, tasks: false });
  });

  test('codex exec 0.169.0', async () => {
    const tap = tapLogFor('codex');
    const server = agentsServer(tap);
    const done = await run(clis.codex, [
      'exec',
      '--json',
      '--skip-git-repo-check',
      // A model outside codex's catalog: the server's tools are offered at once, not behind a
      // tool search whose ranking among 17 tools decides whether the fake finds `list`.
      '-m',
      'fake-model',
      '-c',
      `mcp_servers.agents.command=${JSON.stringify(server.command)}`,
      '-c',
      `mcp_servers.agents.args=${JSON.stringify(server.args)}`,
      '-c',
      `mcp_servers.agents.env=${tomlTable(server.env)}`,
      '-c',
      'mcp_servers.agents.default_tools_approval_mode="approve"',
      // Required: codex waits for the server's tools before the first turn (otherwise, on a
      // loaded machine, the turn may start without them; measured).
      '-c',
      'mcp_servers.agents.required=true',
      '-c',
      'mcp_servers.agents.startup_timeout_sec=60',
      '-',
    ]);
    expect(done.code, done.stderr).toBe(0);
    expect(negotiated(tap), `${done.stdout}\n${readFileSync(tap, 'utf8')}`).toEqual({
      first: 'initialize',
      era: '2025-06-18',
      called: 'list',
      answered: true,
      tasks: false,
    });
  });

  test('copilot -p 1.0.102', async () => {
    const tap = tapLogFor('copilot');
    const file = mcpFile(tap, { tools: ['*'] });
    const done = await run(clis.copilot, [
      '--output-format',
      'json',
      '--model',
      'gpt-5.4',
      '--additional-mcp-config',
      `@${file}`,
      '--allow-tool',
      'agents',
    ]);
    expect(done.code, done.stderr).toBe(0);
    expect(negotiated(tap)).toEqual({
      first: 'server/discover',
      era: '2026-07-28',
      called: 'list',
      answered: true,
      tasks: false,
    });
  });
});

/** An inline TOML table of strings, as codex's `-c key=value` takes one. */
const tomlTable = (values: Record<string, string>) =>
  `{${Object.entries(values)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(', ')}}`;
