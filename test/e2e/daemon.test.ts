// `polyspawn daemon` and the stdio relay: a client started the usual way (`polyspawn serve` on
// stdio) shares the daemon's job table with an SDK client over HTTP; two daemons started at once;
// a daemon killed under its clients; a new daemon recovering its jobs.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request, type ClientRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { httpClient, projectTokenOf, readDaemonJson, runPolyspawn, serverEnv } from '../helpers/http.js';
import { startServer } from '../helpers/mcp.js';
import { isGone, waitFor, waitGone } from '../helpers/processes.js';

vi.setConfig({ testTimeout: 150_000 });

type Job = { agent_id: string; state: string; text?: string };
type Waited = { finished: Job[]; pending: Job[] };
const LONG_WAIT_S = 60;
const WOKEN_WITHIN_MS = 20_000;

const projects: string[] = [];
afterEach(async () => {
  for (const dir of projects.splice(0)) {
    await runPolyspawn(['daemon', 'stop'], dir);
    rmSync(dir, { recursive: true, force: true });
  }
});
const project = () => {
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-daemon-'));
  projects.push(dir);
  return dir;
};
const startDaemon = async (dir: string, env: Record<string, string> = {}) => {
  const run = await runPolyspawn(['daemon', 'start'], dir, serverEnv(dir, env));
  expect(run.code, run.stderr).toBe(0);
  return readDaemonJson(dir)!;
};

describe('a stdio client relayed to the daemon and an HTTP client share one table', () => {
  test('one spawns, the other waits and gets the result, both ways; the limit holds across both', async () => {
    const dir = project();
    const daemon = await startDaemon(dir, { POLYSPAWN_CONCURRENCY: '1' });
    const stdio = await startServer({ projectDir: dir });
    const logs: string[] = [];
    stdio.client.setNotificationHandler(
      LoggingMessageNotificationSchema,
      (n) => void logs.push(JSON.stringify(n.params)),
    );
    const http = await httpClient(daemon.url, projectTokenOf(dir));
    try {
      expect(stdio.stderr()).toContain(`relaying this client to the project's daemon at ${daemon.url}`);
      // stdio spawns, HTTP waits.
      const first = await stdio.callOk<Job>('spawn_codex', { prompt: 'relayed [[cli:sleep:300]]' });
      let startedAt = Date.now();
      const waited = await http.callOk<Waited>('wait_for_agents', {
        agent_ids: [first.agent_id],
        timeout_s: LONG_WAIT_S,
      });
      expect(Date.now() - startedAt).toBeLessThan(WOKEN_WITHIN_MS);
      expect(waited.finished[0]).toMatchObject({ agent_id: first.agent_id, state: 'succeeded' });
      // The daemon's notifications reach the relayed client.
      await waitFor('the finished notification through the relay', () => logs.some((l) => l.includes(first.agent_id)));
      // HTTP spawns one that holds the only slot; stdio's waits in the queue.
      const holder = await http.callOk<Job>('spawn_claude', { prompt: 'holds the slot [[cli:hang]]' });
      const queued = await stdio.callOk<Job>('spawn_claude', { prompt: 'queued behind [[cli:sleep:10]]' });
      expect((await http.callOk<Job>('result', { agent_id: queued.agent_id })).state).toBe('queued');
      const waiting = stdio.callOk<Waited>('wait_for_agents', { agent_ids: [queued.agent_id], timeout_s: LONG_WAIT_S });
      startedAt = Date.now();
      await http.callOk('cancel', { agent_id: holder.agent_id });
      const done = await waiting;
      expect(Date.now() - startedAt).toBeLessThan(WOKEN_WITHIN_MS);
      expect(done.finished[0]).toMatchObject({ agent_id: queued.agent_id, state: 'succeeded' });
    } finally {
      await http.close();
      await stdio.close();
    }
  });

  test('progress notifications come through the relay, and a cancelled call leaves the relay serving', async () => {
    const dir = project();
    await startDaemon(dir);
    const stdio = await startServer({ projectDir: dir });
    try {
      const job = await stdio.callOk<Job>('spawn_codex', { prompt: 'slow enough for progress [[cli:hang]]' });
      const progress: string[] = [];
      const aborter = new AbortController();
      const waiting = stdio.client.callTool(
        { name: 'wait_for_agents', arguments: { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S } },
        undefined,
        { onprogress: (p) => void progress.push(p.message ?? ''), signal: aborter.signal, timeout: 120_000 },
      );
      // The server sends one every 5 s while it waits.
      await waitFor('a progress notification through the relay', () => progress.length > 0, 30_000);
      expect(progress[0]).toContain('0 of 1 agents finished');
      aborter.abort('no longer needed');
      await expect(waiting).rejects.toThrow();
      expect((await stdio.callOk<Job>('result', { agent_id: job.agent_id })).state).toBe('running');
      await stdio.callOk('cancel', { agent_id: job.agent_id });
    } finally {
      await stdio.close();
    }
  });

  test('a request the daemon refuses (too large a body): the relayed client gets the refusal, and the relay serves on', async () => {
    const dir = project();
    await startDaemon(dir);
    const stdio = await startServer({ projectDir: dir });
    try {
      const refused = await stdio.client
        .callTool({ name: 'list', arguments: { pad: 'x'.repeat(300 * 1024) } }, undefined, {
          timeout: LONG_WAIT_S * 1000,
        })
        .then(
          (r) => `answered: ${JSON.stringify(r).slice(0, 200)}`,
          (e: Error) => e.message,
        );
      expect(refused).toContain('the daemon refused it');
      expect(refused).toContain('Payload Too Large: a request body may hold at most');
      expect((await stdio.callOk<{ agents: Job[] }>('list')).agents).toEqual([]);
    } finally {
      await stdio.close();
    }
  });

  test('the relayed client going away leaves its agent running in the daemon', async () => {
    const dir = project();
    const daemon = await startDaemon(dir);
    const stdio = await startServer({ projectDir: dir });
    const job = await stdio.callOk<Job>('spawn_codex', { prompt: 'outlives its relay [[cli:hang]]' });
    const bridgePid = stdio.transport.pid!;
    await stdio.close();
    await waitGone(bridgePid, 20_000);
    const http = await httpClient(daemon.url, projectTokenOf(dir));
    try {
      expect((await http.callOk<Job>('result', { agent_id: job.agent_id })).state).toBe('running');
    } finally {
      await http.close();
    }
  });
});

describe('faults', () => {
  test('two daemons started at once: one serves, both say which', async () => {
    const dir = project();
    const [a, b] = await Promise.all([runPolyspawn(['daemon', 'start'], dir), runPolyspawn(['daemon', 'start'], dir)]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    const info = readDaemonJson(dir)!;
    expect(a.stdout).toContain(`pid ${info.pid}`);
    expect(b.stdout).toContain(`pid ${info.pid}`);
    const status = await runPolyspawn(['daemon', 'status'], dir);
    expect(status.stdout).toContain(`running: pid ${info.pid}`);
  });

  test('a SIGKILLed daemon: the relayed client hears so, and a new daemon recovers its jobs as interrupted', async () => {
    const dir = project();
    const daemon = await startDaemon(dir);
    const stdio = await startServer({ projectDir: dir });
    try {
      const job = await stdio.callOk<Job>('spawn_codex', { prompt: 'killed under it [[cli:hang]]' });
      const record = join(dir, '.polyspawn', 'runs', job.agent_id, 'record.json');
      await waitFor(
        'the running job in the store',
        () => existsSync(record) && readFileSync(record, 'utf8').includes('"running"'),
      );
      const waiting = stdio.call('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S });
      const startedAt = Date.now();
      process.kill(daemon.pid, 'SIGKILL');
      const heard = await waiting.then(
        (r) => JSON.stringify(r),
        (e: Error) => e.message,
      );
      expect(Date.now() - startedAt).toBeLessThan(WOKEN_WITHIN_MS);
      expect(heard).toContain(`polyspawn daemon (pid ${daemon.pid}`);
      expect(heard).toContain('has stopped');
      // A later call hears the same, at once.
      const later = await stdio.call('list').then(
        (r) => JSON.stringify(r),
        (e: Error) => e.message,
      );
      expect(later).toContain('has stopped');
      expect(isGone(daemon.pid)).toBe(true);
      const next = await startDaemon(dir);
      const http = await httpClient(next.url, projectTokenOf(dir));
      try {
        // The new daemon recovers the dead one's jobs as it first writes IAC.md, just after it starts.
        await expect
          .poll(async () => (await http.callOk<Job>('result', { agent_id: job.agent_id })).state, { timeout: 20_000 })
          .toBe('interrupted');
      } finally {
        await http.close();
      }
    } finally {
      await stdio.close();
    }
  });

  test('a daemon SIGKILLed while a response streams to the relayed client: the open call ends with the error, no hang', async () => {
    const dir = project();
    const daemon = await startDaemon(dir);
    const stdio = await startServer({ projectDir: dir });
    try {
      const job = await stdio.callOk<Job>('spawn_codex', { prompt: 'killed mid-stream [[cli:hang]]' });
      const progress: string[] = [];
      const waiting = stdio.client
        .callTool(
          { name: 'wait_for_agents', arguments: { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S } },
          undefined,
          { onprogress: (p) => void progress.push(p.message ?? ''), timeout: LONG_WAIT_S * 1000 },
        )
        .then(
          (r) => JSON.stringify(r),
          (e: Error) => e.message,
        );
      // A progress notification came through: the call's response stream is open.
      await waitFor('a progress notification through the relay', () => progress.length > 0, 30_000);
      const startedAt = Date.now();
      process.kill(daemon.pid, 'SIGKILL');
      const heard = await waiting;
      expect(Date.now() - startedAt).toBeLessThan(WOKEN_WITHIN_MS);
      expect(heard).toContain(`polyspawn daemon (pid ${daemon.pid}`);
      expect(heard).toContain('has stopped');
    } finally {
      await stdio.close();
    }
  });

  test('daemon stop ends its agents as SIGTERM does', async () => {
    const dir = project();
    const daemon = await startDaemon(dir);
    const http = await httpClient(daemon.url, projectTokenOf(dir));
    const job = await http.callOk<Job>('spawn_codex', { prompt: 'stopped with its daemon [[cli:hang]]' });
    await http.close();
    const stop = await runPolyspawn(['daemon', 'stop'], dir);
    expect(stop.stdout).toContain(`stopped (pid ${daemon.pid})`);
    // It takes its daemon.json with it: no client is sent to where it listened.
    expect(readDaemonJson(dir)).toBeUndefined();
    // Served alone now (no daemon): the store says how the job ended.
    const alone = await startServer({ projectDir: dir });
    try {
      expect(alone.stderr()).not.toContain('relaying');
      expect((await alone.callOk<Job>('result', { agent_id: job.agent_id })).state).toBe('cancelled');
    } finally {
      await alone.close();
    }
  });
});

describe('a relayed session the daemon ends', () => {
  test('the relay opens a new one with the client’s own initialize, and the client goes on unaware', async () => {
    const dir = project();
    const daemon = await startDaemon(dir);
    const stdio = await startServer({ projectDir: dir });
    const held: ClientRequest[] = [];
    // What the client's SDK finds wrong in what it receives (a response to no request of its own).
    const strays: string[] = [];
    stdio.client.onerror = (error) => void strays.push(error.message);
    try {
      expect((await stdio.callOk<{ agents: Job[] }>('list')).agents).toEqual([]);
      // Newer sessions, each holding a stream as the relay's does, until the daemon's bound
      // (256 a principal, src/mcp/serve-http.ts) has ended the oldest idle one: the relay's.
      for (let i = 0; i < 256; i++) held.push(await streamingSession(daemon.url, projectTokenOf(dir)));
      await waitFor('the daemon to end a session', () =>
        readFileSync(join(dir, '.polyspawn', 'daemon.log'), 'utf8').includes('the oldest idle one'),
      );
      const job = await stdio.callOk<Job>('spawn_codex', { prompt: 'after the session ended' });
      expect((await stdio.callOk<{ agents: Job[] }>('list')).agents.map((a) => a.agent_id)).toContain(job.agent_id);
      expect(stdio.stderr()).toContain("the daemon ended this client's session: opening a new one");
      expect(strays).toEqual([]);
    } finally {
      for (const request of held) request.destroy();
      await stdio.close();
    }
  });
});

/** A session opened over raw HTTP that holds its GET stream open, as a relay's does. */
async function streamingSession(url: string, token: string): Promise<ClientRequest> {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    authorization: `Bearer ${token}`,
  };
  const opened = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'holder', version: '1' } },
    }),
  });
  await opened.text();
  const session = { ...headers, 'mcp-session-id': opened.headers.get('mcp-session-id')! };
  await (
    await fetch(url, {
      method: 'POST',
      headers: session,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    })
  ).text();
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'GET', headers: { ...session, accept: 'text/event-stream' }, agent: false },
      (res) => {
        expect(res.statusCode).toBe(200);
        resolve(req);
      },
    );
    req.on('error', reject).end();
  });
}
