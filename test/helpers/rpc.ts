// The built server driven over raw stdio JSON-RPC, for the reliability suite: every byte the
// server writes to stdout is kept and must parse, line by line, as a JSON-RPC message (the
// stdio transport's only content); requests can carry bytes no JSON encoder would produce
// (invalid UTF-8); and the server can be ended in ways a client library would not.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fakeBinDir, serverEntry } from './mcp.js';
import { isGone, waitFor } from './processes.js';
import { tempDir } from './temp.js';

export type RpcResponse = {
  jsonrpc: '2.0';
  id: number | null;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
};
export type ToolResult = {
  isError?: boolean;
  content?: { type: string; text: string }[];
  structuredContent?: Record<string, unknown>;
};

/** Every server a test file started, so the file can check all of their stdout at the end. */
export const started: RpcServer[] = [];

export type RpcServer = {
  child: ChildProcessWithoutNullStreams;
  pid: number;
  projectDir: string;
  stderr: () => string;
  /** Sends a request (its params as JSON, or raw bytes spliced in by the caller) and waits for the answer. */
  request: (method: string, params?: unknown, timeoutMs?: number) => Promise<RpcResponse>;
  /** Sends one raw line (no newline needed) as the request with this id, and waits for the answer. */
  requestRaw: (id: number, line: Buffer, timeoutMs?: number) => Promise<RpcResponse>;
  nextId: () => number;
  /** tools/call; the tool result (an isError result included), or throws on a JSON-RPC error. */
  call: (name: string, args?: Record<string, unknown>) => Promise<ToolResult>;
  /** structuredContent of a successful tool call; throws with the text of an error result. */
  callOk: <T = Record<string, unknown>>(name: string, args?: Record<string, unknown>) => Promise<T>;
  notifications: Record<string, unknown>[];
  /** Error answers to lines whose id the server could not read (id null). */
  unidentifiedErrors: RpcResponse[];
  /** The initialize answer (server info, capabilities, instructions). */
  initialized?: Record<string, unknown>;
  /** Lines of stdout that are not JSON-RPC messages, and bytes after the last newline. */
  stdoutProblems: () => string[];
  stdoutLines: () => number;
  /** Closes stdin (the client went away) and resolves with the exit code. */
  disconnect: () => Promise<number | null>;
  exited: Promise<number | null>;
};

/** A JSON-RPC 2.0 message as the stdio transport carries it: one object per line. */
export function jsonRpcProblem(line: string): string | undefined {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return `not JSON: ${line.slice(0, 200)}`;
  }
  if (!message || typeof message !== 'object' || Array.isArray(message)) return `not an object: ${line.slice(0, 200)}`;
  const m = message as Record<string, unknown>;
  if (m.jsonrpc !== '2.0') return `no "jsonrpc": "2.0": ${line.slice(0, 200)}`;
  const isResponse = 'id' in m && ('result' in m || 'error' in m);
  const isRequestOrNotification = typeof m.method === 'string';
  if (!isResponse && !isRequestOrNotification) return `neither a response nor a request: ${line.slice(0, 200)}`;
  return undefined;
}

export async function startRpcServer(
  options: {
    env?: Record<string, string>;
    projectDir?: string;
    initialize?: boolean;
    /** Runs the server through another command (e.g. in a namespace): gets node's argv, returns the command's. */
    wrap?: (argv: string[]) => string[];
  } = {},
): Promise<RpcServer> {
  const projectDir = options.projectDir ?? tempDir('reliability');
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('POLYSPAWN_')) env[k] = v;
  delete env.CLAUDECODE;
  Object.assign(
    env,
    {
      PATH: `${fakeBinDir}${delimiter}${process.env.PATH}`,
      POLYSPAWN_KILL_GRACE_S: '1',
      XDG_CONFIG_HOME: join(projectDir, '.xdg-config'),
    },
    options.env,
  );
  const [file, ...args] = (options.wrap ?? ((argv: string[]) => argv))([process.execPath, serverEntry]);
  const child = spawn(file!, args, { cwd: projectDir, env }) as ChildProcessWithoutNullStreams;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.on('error', () => undefined);

  const pending = new Map<number, (r: RpcResponse) => void>();
  const notifications: Record<string, unknown>[] = [];
  const unidentifiedErrors: RpcResponse[] = [];
  const problems: string[] = [];
  let lines = 0;
  let rest = Buffer.alloc(0);
  child.stdout.on('data', (chunk: Buffer) => {
    rest = Buffer.concat([rest, chunk]);
    for (let nl = rest.indexOf(10); nl >= 0; nl = rest.indexOf(10)) {
      const raw = rest.subarray(0, nl);
      rest = rest.subarray(nl + 1);
      lines++;
      // The transport is UTF-8: a line must survive a round trip.
      const text = raw.toString('utf8');
      if (!Buffer.from(text, 'utf8').equals(raw)) problems.push(`not UTF-8: ${text.slice(0, 200)}`);
      const problem = jsonRpcProblem(text.replace(/\r$/, ''));
      if (problem) {
        problems.push(problem);
        continue;
      }
      const message = JSON.parse(text) as RpcResponse & { method?: string };
      if (message.method !== undefined) notifications.push(message as unknown as Record<string, unknown>);
      else if (message.id === null) unidentifiedErrors.push(message);
      else pending.get(message.id)?.(message);
    }
  });

  let id = 0;
  const nextId = () => ++id;
  const waitFor = (n: number, timeoutMs: number) =>
    new Promise<RpcResponse>((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(n);
        reject(new Error(`no answer to request ${n} in ${timeoutMs} ms; stderr: ${stderr.slice(-2000)}`));
      }, timeoutMs);
      pending.set(n, (r) => {
        clearTimeout(timer);
        pending.delete(n);
        resolve(r);
      });
    });
  const requestRaw = (n: number, line: Buffer, timeoutMs = 120_000) => {
    const answer = waitFor(n, timeoutMs);
    child.stdin.write(Buffer.concat([line, Buffer.from('\n')]));
    return answer;
  };
  const request = (method: string, params?: unknown, timeoutMs?: number) => {
    const n = nextId();
    return requestRaw(
      n,
      Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: n, method, ...(params === undefined ? {} : { params }) })),
      timeoutMs,
    );
  };
  const call = async (name: string, args: Record<string, unknown> = {}) => {
    const r = await request('tools/call', { name, arguments: args });
    if (r.error) throw new Error(`${name}: JSON-RPC error ${r.error.code}: ${r.error.message}`);
    return r.result as ToolResult;
  };

  const server: RpcServer = {
    child,
    pid: child.pid!,
    projectDir,
    stderr: () => stderr,
    request,
    requestRaw,
    nextId,
    call,
    callOk: async <T>(name: string, args: Record<string, unknown> = {}) => {
      const result = await call(name, args);
      if (result.isError) throw new Error(`${name} failed: ${result.content?.[0]?.text}`);
      return result.structuredContent as T;
    },
    notifications,
    unidentifiedErrors,
    stdoutProblems: () =>
      rest.length ? [...problems, `bytes after the last newline: ${rest.toString().slice(0, 200)}`] : problems,
    stdoutLines: () => lines,
    disconnect: async () => {
      child.stdin.end();
      return exited;
    },
    exited,
  };
  started.push(server);
  if (options.initialize !== false) {
    const init = await request(
      'initialize',
      { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'polyspawn-reliability', version: '1' } },
      30_000,
    );
    if (init.error) throw new Error(`initialize: ${init.error.message}`);
    server.initialized = init.result;
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  }
  return server;
}

/** Ends a server for good (SIGKILL if it has not exited on its own yet). */
export async function stopServer(server: RpcServer): Promise<void> {
  if (server.child.exitCode === null && server.child.signalCode === null) {
    server.child.stdin.end();
    const timer = setTimeout(() => server.child.kill('SIGKILL'), 15_000);
    await once(server.child, 'exit').catch(() => undefined);
    clearTimeout(timer);
  }
}

/** Pids of live processes whose parent is `ppid` (Linux). */
export function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === ppid && fields[0] !== 'Z') out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

/** The reaper sidecar of a server (process.title "polyspawn-reaper"), if it has started one. */
export function reaperOf(serverPid: number): number | undefined {
  return childrenOf(serverPid).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('polyspawn-reaper');
    } catch {
      return false;
    }
  });
}

/** SIGKILLs a server's reaper sidecar: a SIGKILLed server's jobs then stay as a crash leaves them. */
export async function killReaper(serverPid: number): Promise<void> {
  const reaper = reaperOf(serverPid);
  if (reaper === undefined) throw new Error(`server ${serverPid} has no reaper sidecar`);
  process.kill(reaper, 'SIGKILL');
  await waitFor('the reaper to die', () => isGone(reaper));
}

/** SIGKILLs a server's reaper sidecar, then the server: nothing of theirs can end its jobs now. */
export async function killReaperThenServer(server: RpcServer): Promise<void> {
  await killReaper(server.pid);
  process.kill(server.pid, 'SIGKILL');
  await server.exited;
}

/** Open file descriptors of a process (Linux). */
export const openFds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
/** Resident set of a process now, in MiB (Linux). */
export const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/** Stops every server this file started; returns what any of them wrote to stdout that is not JSON-RPC. */
export async function stopAllAndCollectStdoutProblems(): Promise<string[]> {
  await Promise.all(started.map(stopServer));
  return started.flatMap((s) => s.stdoutProblems().map((p) => `server ${s.pid}: ${p}`));
}

/** Job processes as the fake CLIs report them: leaders' FAKE_CLI_RECORD files and grandchild pid files. */
export function fakeCliPids(dir: string): { leaders: number[]; grandchildren: number[] } {
  const files = readdirSync(dir);
  return {
    leaders: files.filter((f) => /^\d+\.json$/.test(f)).map((f) => Number(f.slice(0, -5))),
    grandchildren: files.filter((f) => /^gc-\d+$/.test(f)).map((f) => Number(readFileSync(join(dir, f), 'utf8'))),
  };
}
