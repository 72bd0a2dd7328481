// Starts the built server (dist/) as a child and talks to it with the SDK's own Client over stdio.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { waitFor } from './processes.js';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const serverEntry = join(repoRoot, 'dist', 'src', 'cli.js');
export const fakeBinDir = join(repoRoot, 'test', 'fakes', 'bin');

export type TestServer = {
  client: Client;
  transport: StdioClientTransport;
  projectDir: string;
  stderr: () => string;
  call: (name: string, args?: Record<string, unknown>) => Promise<CallToolResult>;
  /** structuredContent of a successful call; throws with the text of an error result. */
  callOk: <T = Record<string, unknown>>(name: string, args?: Record<string, unknown>) => Promise<T>;
  /** The text of an error result; throws when the call succeeds. */
  callError: (name: string, args?: Record<string, unknown>) => Promise<string>;
  close: () => Promise<void>;
};

export async function startServer(
  options: {
    env?: Record<string, string>;
    fakeClis?: boolean;
    projectDir?: string;
    /** clientInfo.name sent in initialize */ clientName?: string;
    /** A command the server is started through (node and cli.js are appended as its arguments). */
    launcher?: string[];
  } = {},
): Promise<TestServer> {
  const projectDir = options.projectDir ?? mkdtempSync(join(tmpdir(), 'polyspawn-project-'));
  const path = options.fakeClis === false ? process.env.PATH! : `${fakeBinDir}${delimiter}${process.env.PATH}`;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  delete env.CLAUDECODE;
  Object.assign(
    env,
    { PATH: path, POLYSPAWN_KILL_GRACE_S: '1', XDG_CONFIG_HOME: join(projectDir, '.xdg-config') },
    options.env,
  );
  const command = [...(options.launcher ?? []), process.execPath, serverEntry];
  const transport = new StdioClientTransport({
    command: command[0]!,
    args: command.slice(1),
    cwd: projectDir,
    env,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const client = new Client({ name: options.clientName ?? 'polyspawn-test', version: '0.0.0' });
  await client.connect(transport);
  // As a typed client does: with the tools listed, the Client checks every result's
  // structuredContent against the tool's outputSchema (and refuses a success without one).
  if (client.getServerCapabilities()?.tools) await client.listTools();
  const call = (name: string, args: Record<string, unknown> = {}) =>
    client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 }) as Promise<CallToolResult>;
  return {
    client,
    transport,
    projectDir,
    stderr: () => stderr,
    call,
    callOk: async <T>(name: string, args: Record<string, unknown> = {}) => {
      const result = await call(name, args);
      if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(result.content)}`);
      return result.structuredContent as T;
    },
    callError: async (name: string, args: Record<string, unknown> = {}) => {
      const result = await call(name, args);
      if (!result.isError) throw new Error(`${name} ${JSON.stringify(args).slice(0, 100)} should fail`);
      return (result.content as { text: string }[])[0]!.text;
    },
    close: async () => {
      await client.close();
      if (!options.projectDir) rmSync(projectDir, { recursive: true, force: true });
    },
  };
}

/** A job once it is no longer running, read with `result` until then (at most `ms`). */
export async function jobOnceEnded<T extends { state: string }>(s: TestServer, id: string, ms: number): Promise<T> {
  let job: T | undefined;
  await waitFor(
    `agent ${id} to end`,
    async () => (job = await s.callOk<T>('result', { agent_id: id })).state !== 'running',
    ms,
  );
  return job!;
}
