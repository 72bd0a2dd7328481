// The built server started as `polyspawn serve --http` (or as a daemon) in a project, and SDK
// clients that talk to it over Streamable HTTP with the project's token.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { fakeBinDir, serverEntry } from './mcp.js';
import { waitFor } from './processes.js';

export type DaemonJson = { url: string; port: number; pid: number; start?: string; started_at: string };

/** The environment the test servers run with: the fake CLIs first on PATH, a config home of their own. */
export function serverEnv(projectDir: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  delete env.CLAUDECODE;
  delete env.POLYSPAWN_TOKEN;
  return {
    ...env,
    PATH: `${fakeBinDir}${delimiter}${process.env.PATH}`,
    POLYSPAWN_KILL_GRACE_S: '1',
    XDG_CONFIG_HOME: join(projectDir, '.xdg-config'),
    ...extra,
  };
}

export const readDaemonJson = (projectDir: string): DaemonJson | undefined => {
  const file = join(projectDir, '.polyspawn', 'daemon.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as DaemonJson) : undefined;
};

export const projectTokenOf = (projectDir: string) =>
  readFileSync(join(projectDir, '.polyspawn', 'http-token'), 'utf8').trim();

/** Runs the built `polyspawn` with these arguments in the project; resolves with its exit code and output. */
export function runPolyspawn(
  args: string[],
  projectDir: string,
  env: Record<string, string> = serverEnv(projectDir),
  timeoutMs = 60_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [serverEntry, ...args], {
      cwd: projectDir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(
      () => reject(new Error(`polyspawn ${args.join(' ')} ran over ${timeoutMs} ms: ${stderr}`)),
      timeoutMs,
    );
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export type HttpTestServer = {
  projectDir: string;
  child: ChildProcess;
  url: string;
  token: string;
  stderr: () => string;
  /** A new SDK client, connected with the token. */
  connect(name?: string): Promise<HttpTestClient>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
};

export type HttpTestClient = {
  client: Client;
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult>;
  callOk<T = Record<string, unknown>>(name: string, args?: Record<string, unknown>): Promise<T>;
  close(): Promise<void>;
};

export async function httpClient(url: string, token: string, name = 'http-test'): Promise<HttpTestClient> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name, version: '0.0.0' });
  await client.connect(transport);
  const call = (tool: string, args: Record<string, unknown> = {}) =>
    client.callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 }) as Promise<CallToolResult>;
  return {
    client,
    call,
    async callOk<T>(tool: string, args: Record<string, unknown> = {}) {
      const result = await call(tool, args);
      if (result.isError) throw new Error(`${tool} failed: ${JSON.stringify(result.content)}`);
      return result.structuredContent as T;
    },
    // As a well-behaved client leaves: the session ended (DELETE), then the connection.
    close: async () => {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    },
  };
}

/** `polyspawn serve --http` in a new project (or the one given), once its daemon.json names it. */
export async function startHttpServer(
  options: { env?: Record<string, string>; args?: string[]; projectDir?: string } = {},
): Promise<HttpTestServer> {
  const projectDir = options.projectDir ?? mkdtempSync(join(tmpdir(), 'polyspawn-http-'));
  const child = spawn(process.execPath, [serverEntry, 'serve', '--http', ...(options.args ?? [])], {
    cwd: projectDir,
    env: serverEnv(projectDir, options.env),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  let exited = false;
  child.once('exit', () => (exited = true));
  await waitFor(
    'the HTTP server to write daemon.json',
    () => exited || readDaemonJson(projectDir)?.pid === child.pid,
    30_000,
  );
  if (exited) throw new Error(`polyspawn serve --http exited: ${stderr}`);
  const url = readDaemonJson(projectDir)!.url;
  const token = options.env?.POLYSPAWN_TOKEN ?? projectTokenOf(projectDir);
  const clients: HttpTestClient[] = [];
  return {
    projectDir,
    child,
    url,
    token,
    stderr: () => stderr,
    async connect(name) {
      const c = await httpClient(url, token, name);
      clients.push(c);
      return c;
    },
    async stop() {
      await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
      if (!exited) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await gone;
      }
      if (!options.projectDir) rmSync(projectDir, { recursive: true, force: true });
    },
  };
}

/** The dashboard's cookie ("name=value"), traded for the token as a browser does on the address `polyspawn dashboard` prints. */
export async function dashboardCookie(server: Pick<HttpTestServer, 'url' | 'token'>): Promise<string> {
  const origin = new URL(server.url).origin;
  const admitted = await fetch(`${origin}/?token=${encodeURIComponent(server.token)}`, { redirect: 'manual' });
  if (admitted.status !== 303) throw new Error(`the dashboard did not admit the token: ${admitted.status}`);
  return admitted.headers.get('set-cookie')!.split(';', 1)[0]!;
}
