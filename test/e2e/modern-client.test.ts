// The 2026-07-28 era with the SDK v2's own client: it probes with server/discover, settles on
// 2026-07-28, and then every tool, resource and list works as for a 2025 client (which every
// other e2e test is: the SDK v1 client, initialize, 2025-06-18).
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { serverEnv, startHttpServer } from '../helpers/http.js';
import { fakeBinDir, serverEntry } from '../helpers/mcp.js';
import { tempDir } from '../helpers/temp.js';
import { delimiter, join } from 'node:path';

let client: Client;
let stderr = '';

beforeAll(async () => {
  const projectDir = tempDir('modern-client');
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('POLYSPAWN_')) env[k] = v;
  delete env.CLAUDECODE;
  Object.assign(env, {
    PATH: `${fakeBinDir}${delimiter}${process.env.PATH}`,
    POLYSPAWN_KILL_GRACE_S: '1',
    XDG_CONFIG_HOME: join(projectDir, '.xdg-config'),
  });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [serverEntry],
    cwd: projectDir,
    env,
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  client = new Client({ name: 'modern-e2e', version: '1' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(transport);
}, 60_000);

afterAll(async () => {
  await client?.close();
});

describe('a 2026-07-28 client (SDK v2, server/discover)', () => {
  test('negotiates 2026-07-28 and gets the instructions and the tools, validated by the client', async () => {
    expect(client.getNegotiatedProtocolVersion(), stderr).toBe('2026-07-28');
    expect(client.getInstructions()).toContain('polyspawn runs coding agents');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['spawn_codex', 'run_team', 'wait_for_agents']));
    // A tool's listing is the same as a 2025 client's: its output schema and every hint.
    const spawn = tools.find((t) => t.name === 'spawn_codex')!;
    expect(spawn.outputSchema).toMatchObject({ type: 'object' });
    expect(spawn.annotations).toMatchObject({ destructiveHint: true, openWorldHint: true });
  });

  test('a spawn blocks as today without the tasks extension, and wait_for_agents and result read it', async () => {
    const spawned = await client.callTool({ name: 'spawn_codex', arguments: { prompt: 'modern hello' } });
    const agentId = (spawned.structuredContent as { agent_id: string }).agent_id;
    const waited = await client.callTool({
      name: 'wait_for_agents',
      arguments: { agent_ids: [agentId], timeout_s: 60 },
    });
    const finished = (waited.structuredContent as { finished: { agent_id: string; state: string; text: string }[] })
      .finished;
    expect(finished).toEqual([expect.objectContaining({ agent_id: agentId, state: 'succeeded' })]);
    expect(finished[0]!.text).toContain('FAKE codex: modern hello');
    const result = await client.callTool({ name: 'result', arguments: { agent_id: agentId } });
    expect(result.structuredContent).toMatchObject({ agent_id: agentId, state: 'succeeded' });
  });

  test('bad input is a tool error that says what to change', async () => {
    const result = await client.callTool({ name: 'result', arguments: { agent_id: 'nosuch' } });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('no agent with id');
  });

  test('resources: IAC.md and an agent record are read', async () => {
    const { resources } = await client.listResources();
    expect(resources.map((r) => r.uri)).toContain('polyspawn://IAC.md');
    const iac = await client.readResource({ uri: 'polyspawn://IAC.md' });
    expect(JSON.stringify(iac.contents)).toContain('IAC.md');
  });
});

describe("a 2026-07-28 client relayed to the project's daemon (polyspawn serve while serve --http runs)", () => {
  test('its server/discover is refused as by a 2025-only server, it falls back to initialize, and it is served', async () => {
    const daemon = await startHttpServer();
    let relayed: Client | undefined;
    let relayStderr = '';
    try {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [serverEntry],
        cwd: daemon.projectDir,
        env: serverEnv(daemon.projectDir),
        stderr: 'pipe',
      });
      transport.stderr?.on('data', (chunk: Buffer) => (relayStderr += chunk.toString()));
      relayed = new Client({ name: 'modern-relayed', version: '1' }, { versionNegotiation: { mode: 'auto' } });
      await relayed.connect(transport);
      expect(relayStderr).toContain("relaying this client to the project's daemon");
      expect(relayed.getNegotiatedProtocolVersion()).not.toBe('2026-07-28');
      const listed = await relayed.callTool({ name: 'list', arguments: {} });
      expect(listed.structuredContent).toMatchObject({ agents: [] });
    } finally {
      await relayed?.close();
      await daemon.stop();
    }
  });
});
