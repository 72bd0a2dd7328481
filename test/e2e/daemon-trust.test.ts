// Whom the stdio relay and `polyspawn daemon` believe, and whom the daemon serves spawn tools:
// a daemon.json that a repository shipped or an agent wrote must not redirect a client (its
// prompts, its tokens) nor get a process signalled; an agent that read the project's token gets
// no spawn tools from the daemon; a daemon on ::1 is reachable.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  copyFileSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { processStart } from '../../src/lib/proc.js';
import {
  httpClient,
  projectTokenOf,
  readDaemonJson,
  runPolyspawn,
  serverEnv,
  type DaemonJson,
} from '../helpers/http.js';
import { repoRoot, serverEntry, startServer } from '../helpers/mcp.js';
import { isGone, waitGone } from '../helpers/processes.js';
import { bwrapWorks } from '../helpers/tools.js';

vi.setConfig({ testTimeout: 150_000 });

type Job = { agent_id: string; state: string; text?: string };
/** What test/fakes/drive-daemon.mjs reports. */
type Driven = { initialized: boolean; tools: string[]; call: { isError: boolean; text: string } };

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const project = () => {
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-trust-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, '.polyspawn'), { mode: 0o700 });
  return dir;
};

/** A daemon started with `polyspawn daemon start`, stopped by its pid (daemon.json may be replaced by the test). */
const startDaemon = async (dir: string, args: string[] = [], env: Record<string, string> = {}) => {
  const run = await runPolyspawn(['daemon', 'start', ...args], dir, serverEnv(dir, env));
  expect(run.code, run.stderr).toBe(0);
  const daemon = readDaemonJson(dir)!;
  cleanups.push(async () => {
    if (isGone(daemon.pid)) return;
    process.kill(daemon.pid, 'SIGTERM');
    await waitGone(daemon.pid, 30_000);
  });
  return daemon;
};

/** An unrelated live process of this user, with the start a daemon.json would record for it. */
const unrelatedProcess = (): { pid: number; start: string } => {
  const child: ChildProcess = spawn('sleep', ['600'], { stdio: 'ignore' });
  cleanups.push(() => child.kill('SIGKILL'));
  return { pid: child.pid!, start: processStart(child.pid!)! };
};

/** A server on 127.0.0.1 that a planted daemon.json points at: records every request, answers each with a redirect. */
const fakeDaemon = async () => {
  const received: string[] = [];
  const server: Server = createServer((req, res) => {
    received.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`);
    res.writeHead(307, { Location: `http://127.0.0.1:${port}/elsewhere` }).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { port, url: `http://127.0.0.1:${port}/mcp`, received };
};

const daemonFile = (dir: string) => join(dir, '.polyspawn', 'daemon.json');
const plant = (dir: string, content: DaemonJson | string, mode = 0o600) => {
  rmSync(daemonFile(dir), { force: true });
  writeFileSync(daemonFile(dir), typeof content === 'string' ? content : JSON.stringify(content), { mode });
};
/** The project's token file, as a daemon once made it: what the relay would send. */
const plantToken = (dir: string) =>
  writeFileSync(join(dir, '.polyspawn', 'http-token'), 'psp_thisprojectstokenthisprojectstoken0000000\n', {
    mode: 0o600,
  });

/** Another project's token in the client's environment: must never leave for a URL the project named. */
const OTHER_TOKEN = 'psp_anotherprojectstokenanotherprojectstoken00';

/** A stdio client started the usual way; it must serve alone, and say why. */
async function servesAlone(dir: string, why: string) {
  const stdio = await startServer({ projectDir: dir, env: { POLYSPAWN_TOKEN: OTHER_TOKEN } });
  try {
    const tools = (await stdio.client.listTools()).tools.map((t) => t.name);
    expect(tools).toContain('spawn_codex');
    expect(stdio.stderr()).not.toContain('relaying this client');
    expect(stdio.stderr()).toContain('not relaying to a daemon');
    expect(stdio.stderr()).toContain(why);
  } finally {
    await stdio.close();
  }
}

describe('a planted daemon.json: the relay sends nothing to it and serves alone', () => {
  type Planted = { content: (fake: DaemonJson, dir: string) => DaemonJson | string; mode?: number; why: string };
  const cases: [string, Planted][] = [
    ['a live process of yours that is no daemon', { content: (f) => f, why: 'is not `polyspawn serve --http`' }],
    [
      'mode 0644, as a clone leaves it',
      { content: (f) => f, mode: 0o644, why: 'can be read or written by other users' },
    ],
    ['pid 1', { content: (f) => ({ ...f, pid: 1 }), why: 'names no process' }],
    ['malformed JSON', { content: (f) => JSON.stringify(f).slice(0, -3), why: 'is not JSON' }],
    ['huge', { content: (f) => JSON.stringify(f) + ' '.repeat(1 << 20), why: 'is larger than polyspawn writes it' }],
    [
      'a URL that is not loopback',
      { content: (f) => ({ ...f, url: `http://192.0.2.1:${f.port}/mcp` }), why: 'names a URL that is not' },
    ],
    [
      'a URL with credentials',
      { content: (f) => ({ ...f, url: `http://u:p@127.0.0.1:${f.port}/mcp` }), why: 'names a URL that is not' },
    ],
    [
      'a URL with another path',
      { content: (f) => ({ ...f, url: `http://127.0.0.1:${f.port}/steal?x=1` }), why: 'names a URL that is not' },
    ],
  ];
  test.each(cases)('%s', async (_, planted) => {
    const dir = project();
    plantToken(dir);
    const fake = await fakeDaemon();
    const unrelated = unrelatedProcess();
    const info: DaemonJson = { url: fake.url, port: fake.port, ...unrelated, started_at: new Date().toISOString() };
    plant(dir, planted.content(info, dir), planted.mode);
    await servesAlone(dir, planted.why);
    expect(fake.received).toEqual([]);
  });

  test('a link to a private file, a hard link, and a FIFO', async () => {
    const dir = project();
    plantToken(dir);
    const fake = await fakeDaemon();
    const target = join(dir, 'elsewhere.json');
    const info = { url: fake.url, port: fake.port, ...unrelatedProcess(), started_at: '' };
    writeFileSync(target, JSON.stringify(info), { mode: 0o600 });
    symlinkSync(target, daemonFile(dir));
    await servesAlone(dir, 'is a link');
    rmSync(daemonFile(dir));
    linkSync(target, daemonFile(dir));
    await servesAlone(dir, 'has another name (a hard link)');
    rmSync(daemonFile(dir));
    execFileSync('mkfifo', ['-m', '600', daemonFile(dir)]);
    await servesAlone(dir, 'is not a regular file');
    expect(fake.received).toEqual([]);
  });

  test("the project's real daemon named with another port, and another project's daemon", async () => {
    const dir = project();
    const daemon = await startDaemon(dir);
    const fake = await fakeDaemon();
    plant(dir, { ...daemon, port: fake.port, url: fake.url });
    await servesAlone(dir, `does not listen on port ${fake.port}`);
    expect(fake.received).toEqual([]);

    const other = project();
    plantToken(other);
    plant(other, daemon);
    await servesAlone(other, 'serves another project');

    // A repository's .polyspawn that links to this project's state folder.
    const linked = mkdtempSync(join(tmpdir(), 'polyspawn-trust-'));
    cleanups.push(() => rmSync(linked, { recursive: true, force: true }));
    symlinkSync(join(dir, '.polyspawn'), join(linked, '.polyspawn'));
    plant(dir, daemon);
    await servesAlone(linked, 'is not a folder (not a link)');
  });
});

describe('polyspawn daemon with a planted daemon.json', () => {
  test('stop signals nothing, status says not running, start starts the daemon', async () => {
    const dir = project();
    const fake = await fakeDaemon();
    const unrelated = unrelatedProcess();
    plant(dir, { url: fake.url, port: fake.port, ...unrelated, started_at: new Date().toISOString() });

    const status = await runPolyspawn(['daemon', 'status'], dir);
    expect(status.code).toBe(3);
    expect(status.stdout).toContain('not running');
    const stop = await runPolyspawn(['daemon', 'stop'], dir);
    expect(stop.code, stop.stderr).toBe(0);
    expect(stop.stdout).toContain('not running');
    expect(isGone(unrelated.pid)).toBe(false);

    const start = await runPolyspawn(['daemon', 'start'], dir);
    expect(start.code, start.stderr).toBe(0);
    const daemon = readDaemonJson(dir)!;
    expect(daemon.pid).not.toBe(unrelated.pid);
    expect(start.stdout).toContain(`started: pid ${daemon.pid}`);
    const stopped = await runPolyspawn(['daemon', 'stop'], dir);
    expect(stopped.stdout).toContain(`stopped (pid ${daemon.pid})`);
    expect(isGone(unrelated.pid)).toBe(false);
    expect(fake.received).toEqual([]);
  });

  test("a daemon.log or http-token that is a link to a file of the user's: start refuses, the file is untouched", async () => {
    const dir = project();
    const users = join(dir, 'users-file');
    writeFileSync(users, "the user's own file\n", { mode: 0o600 });
    symlinkSync(users, join(dir, '.polyspawn', 'daemon.log'));
    const viaLog = await runPolyspawn(['daemon', 'start'], dir);
    expect(viaLog.code).not.toBe(0);
    expect(viaLog.stderr).toContain('daemon.log is a link');
    rmSync(join(dir, '.polyspawn', 'daemon.log'));
    symlinkSync(users, join(dir, '.polyspawn', 'http-token'));
    const viaToken = await runPolyspawn(['daemon', 'start'], dir);
    expect(viaToken.code).not.toBe(0);
    expect(viaToken.stderr).toContain('http-token is a link');
    expect(readFileSync(users, 'utf8')).toBe("the user's own file\n");
    expect(readDaemonJson(dir)).toBeUndefined();
  });
});

describe('a daemon started inside an agent', () => {
  test('refuses to start, even with the marker only on an ancestor', async () => {
    const dir = project();
    const direct = await runPolyspawn(['daemon', 'start'], dir, serverEnv(dir, { POLYSPAWN_DEPTH: '1' }));
    expect(direct.code).not.toBe(0);
    expect(direct.stderr).toContain('runs inside an agent that polyspawn started (POLYSPAWN_DEPTH=1)');
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(
        'sh',
        ['-c', 'env -u POLYSPAWN_DEPTH "$@"; exit $?', 'sh', process.execPath, serverEntry, 'serve', '--http'],
        {
          cwd: dir,
          env: serverEnv(dir, { POLYSPAWN_DEPTH: '2' }),
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
      let stderr = '';
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('POLYSPAWN_DEPTH=2');
    expect(readDaemonJson(dir)).toBeUndefined();
  });
});

describe('--host ::1', () => {
  test('the daemon writes a [::1] URL, accepts that Host, and a stdio client is relayed to it', async () => {
    const dir = project();
    const daemon = await startDaemon(dir, ['--host', '::1']);
    expect(daemon.url).toBe(`http://[::1]:${daemon.port}/mcp`);
    const http = await httpClient(daemon.url, projectTokenOf(dir));
    const stdio = await startServer({ projectDir: dir });
    try {
      expect(stdio.stderr()).toContain(
        `relaying this client to the project's daemon at http://[::1]:${daemon.port}/mcp`,
      );
      const job = await stdio.callOk<Job>('spawn_codex', { prompt: 'over ::1' });
      expect((await http.callOk<Job>('result', { agent_id: job.agent_id })).agent_id).toBe(job.agent_id);
    } finally {
      await stdio.close();
      await http.close();
    }
  });
});

describe('an agent that read the token gets no spawn tools from the daemon', () => {
  test('a process under a daemon job, its environment cleared, opens a session over raw HTTP', async () => {
    const dir = project();
    const daemon = await startDaemon(dir);
    const http = await httpClient(daemon.url, projectTokenOf(dir));
    try {
      const job = await http.callOk<Job>('spawn_codex', {
        prompt: `[[cli:drive-daemon:${join(dir, '.polyspawn')}]]`,
        wait_s: 60,
      });
      expect(job.state, JSON.stringify(job)).toBe('succeeded');
      const driven = JSON.parse(job.text!) as Driven;
      expect(driven.initialized).toBe(true);
      expect(driven.tools).toContain('list');
      expect(driven.tools.filter((t) => t.startsWith('spawn_') || t === 'run_team')).toEqual([]);
      expect(driven.call.isError).toBe(true);
      expect(driven.call.text).toContain('spawn_codex refused');
      const listed = await http.callOk<{ agents: (Job & { prompt?: string })[] }>('list');
      expect(listed.agents).toHaveLength(1);
    } finally {
      await http.close();
    }
  });

  test.skipIf(!bwrapWorks)(
    'a sandboxed agent (bwrap, network on) that leaves its process tree and clears its environment',
    async () => {
      const dir = project();
      // Its own copies of the daemon's files, where the sandbox shows them (the store may be hidden).
      const config = join(dir, '.xdg-config', 'config.json');
      mkdirSync(join(dir, '.xdg-config'));
      const mounts = [{ path: join(repoRoot, 'test', 'fakes') }];
      writeFileSync(
        config,
        JSON.stringify({ backends: { codex: { sandbox: { mode: 'bwrap', network: true, mounts } } } }),
      );
      const daemon = await startDaemon(dir, [], { POLYSPAWN_CONFIG: config });
      const leaked = join(dir, 'leaked');
      mkdirSync(leaked);
      for (const file of ['daemon.json', 'http-token']) copyFileSync(join(dir, '.polyspawn', file), join(leaked, file));
      const http = await httpClient(daemon.url, projectTokenOf(dir));
      try {
        const job = await http.callOk<Job & { sandbox?: string }>('spawn_codex', {
          prompt: `[[cli:drive-daemon:${leaked}]] [[cli:drive-detached]]`,
          wait_s: 60,
        });
        expect(job.state, JSON.stringify(job)).toBe('succeeded');
        expect(job.sandbox).toBe('bwrap');
        const driven = JSON.parse(job.text!) as Driven;
        expect(driven.initialized).toBe(true);
        expect(driven.tools.filter((t) => t.startsWith('spawn_') || t === 'run_team')).toEqual([]);
        expect(driven.call.isError).toBe(true);
      } finally {
        await http.close();
      }
    },
  );

  test("a nested polyspawn whose client cleared the marker from its environment serves its own tree, not the daemon's", async () => {
    const dir = project();
    await startDaemon(dir);
    // The agent's process holds the marker; the client it starts polyspawn from clears it (Codex does).
    const nested = await startServer({
      projectDir: dir,
      env: { POLYSPAWN_DEPTH: '1' },
      launcher: ['sh', '-c', 'env -u POLYSPAWN_DEPTH "$@"; exit $?', 'sh'],
    });
    try {
      expect(nested.stderr()).not.toContain('relaying');
      const tools = (await nested.client.listTools()).tools.map((t) => t.name);
      expect(tools).toContain('list');
      expect(tools.filter((t) => t.startsWith('spawn_'))).toEqual([]);
    } finally {
      await nested.close();
    }
  });
});
