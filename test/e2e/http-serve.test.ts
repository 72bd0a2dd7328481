// `polyspawn serve --http`: the built server shared by several SDK clients over Streamable HTTP,
// with the fake CLIs on PATH. One job table, one concurrency limit for all of them; refusals
// that leave it serving; a client that goes away mid-wait.
import { createServer } from 'node:net';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { runPolyspawn, serverEnv, startHttpServer, type HttpTestServer } from '../helpers/http.js';
import { tempDir } from '../helpers/temp.js';

vi.setConfig({ testTimeout: 150_000 });

type Job = { agent_id: string; state: string; text?: string };
type Waited = { finished: Job[]; pending: Job[]; timed_out: boolean };

/** Waits get this long; woken ones must return well within WOKEN_WITHIN_MS. */
const LONG_WAIT_S = 60;
const WOKEN_WITHIN_MS = 20_000;

let s: HttpTestServer;
beforeAll(async () => {
  s = await startHttpServer({ env: { POLYSPAWN_CONCURRENCY: '2' } });
});
afterAll(async () => {
  await s?.stop();
});

describe('two clients, one job table', () => {
  test('one spawns, the other waits for it and gets its result', async () => {
    const a = await s.connect('a');
    const b = await s.connect('b');
    const job = await a.callOk<Job>('spawn_codex', { prompt: 'shared [[cli:sleep:500]]' });
    const startedAt = Date.now();
    const waited = await b.callOk<Waited>('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S });
    expect(Date.now() - startedAt).toBeLessThan(WOKEN_WITHIN_MS);
    expect(waited.pending).toEqual([]);
    expect(waited.finished[0]).toMatchObject({ agent_id: job.agent_id, state: 'succeeded' });
    expect(waited.finished[0]!.text).toContain('shared');
    // And b's list shows a's agent.
    const listed = await b.callOk<{ agents: Job[] }>('list');
    expect(listed.agents.map((j) => j.agent_id)).toContain(job.agent_id);
  });

  test("an agent's question wakes each client's wait once", async () => {
    const a = await s.connect('a');
    const b = await s.connect('b');
    const job = await a.callOk<Job>('spawn_codex', { prompt: 'asks both [[cli:ask:Which one?]]' });
    type Asked = Waited & { questions?: { agent_id: string; message_id: string }[]; timed_out: boolean };
    const startedAt = Date.now();
    const [fromA, fromB] = (await Promise.all(
      [a, b].map((c) => c.callOk<Asked>('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S })),
    )) as [Asked, Asked];
    expect(Date.now() - startedAt).toBeLessThan(WOKEN_WITHIN_MS);
    expect(fromA.questions?.[0]?.agent_id).toBe(job.agent_id);
    expect(fromB.questions?.[0]?.agent_id).toBe(job.agent_id);
    // Once returned to a client, the same question no longer wakes that client's wait: it runs its
    // time out (a lower bound, not a speed), and still lists the question.
    const againAt = Date.now();
    const again = await a.callOk<Asked>('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: 1 });
    expect(Date.now() - againAt).toBeGreaterThanOrEqual(900);
    expect(again.questions).toHaveLength(1);
    await b.callOk('reply_subagent', {
      agent_id: job.agent_id,
      message_id: fromB.questions![0]!.message_id,
      answer: 'that one',
    });
    let done: Job | undefined;
    for (let i = 0; i < 3 && !done; i++)
      done = (await a.callOk<Waited>('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S }))
        .finished[0];
    expect(done).toMatchObject({ state: 'succeeded' });
  });

  test('the concurrency limit holds across clients', async () => {
    const a = await s.connect('a');
    const b = await s.connect('b');
    const first = await a.callOk<Job>('spawn_claude', { prompt: 'limit a1 [[cli:hang]]' });
    const second = await a.callOk<Job>('spawn_claude', { prompt: 'limit a2 [[cli:hang]]' });
    const third = await b.callOk<Job>('spawn_claude', { prompt: 'limit b1 [[cli:hang]]' });
    const listed = await b.callOk<{ running: number; queued: number; agents: Job[] }>('list');
    const stateOf = (id: string) => listed.agents.find((j) => j.agent_id === id)?.state;
    expect(listed.running).toBe(2);
    expect(stateOf(third.agent_id)).toBe('queued');
    // b cancels a's agents: the table is one.
    await b.callOk('cancel', { agent_id: first.agent_id });
    await b.callOk('cancel', { agent_id: second.agent_id });
    await a.callOk('cancel', { agent_id: third.agent_id });
    const after = await a.callOk<{ running: number; queued: number }>('list');
    expect(after).toMatchObject({ running: 0, queued: 0 });
  });

  test('a client that goes away mid-wait ends only its own wait; its agent keeps running', async () => {
    const leaving = await s.connect('leaving');
    const staying = await s.connect('staying');
    const job = await leaving.callOk<Job>('spawn_codex', { prompt: 'outlives its client [[cli:hang]]' });
    const leavingWait = leaving.call('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S });
    const stayingWait = staying.callOk<Waited>('wait_for_agents', {
      agent_ids: [job.agent_id],
      timeout_s: LONG_WAIT_S,
    });
    await new Promise((r) => setTimeout(r, 300));
    await leaving.close();
    await leavingWait.catch(() => undefined);
    const still = await staying.callOk<Job>('result', { agent_id: job.agent_id });
    expect(still.state).toBe('running');
    const startedAt = Date.now();
    await staying.callOk('cancel', { agent_id: job.agent_id });
    const waited = await stayingWait;
    expect(Date.now() - startedAt).toBeLessThan(WOKEN_WITHIN_MS);
    expect(waited.finished[0]).toMatchObject({ agent_id: job.agent_id, state: 'cancelled' });
  });

  test('50 clients at once, each waiting for the same agent, are all woken by its end', async () => {
    const clients = await Promise.all(Array.from({ length: 50 }, (_, i) => s.connect(`c${i}`)));
    const job = await clients[0]!.callOk<Job>('spawn_codex', { prompt: 'fifty [[cli:hang]]' });
    const waits = clients.map((c) =>
      c.callOk<Waited>('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S }),
    );
    await new Promise((r) => setTimeout(r, 500));
    const startedAt = Date.now();
    await clients[49]!.callOk('cancel', { agent_id: job.agent_id });
    const results = await Promise.all(waits);
    expect(Date.now() - startedAt).toBeLessThan(WOKEN_WITHIN_MS);
    for (const waited of results) expect(waited.finished[0]).toMatchObject({ state: 'cancelled' });
    await Promise.all(clients.map((c) => c.close()));
    expect(s.stderr()).not.toMatch(/MaxListenersExceeded/);
  });
});

describe('refusals leave the server serving', () => {
  const post = (headers: Record<string, string>, body: string) =>
    fetch(s.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body,
    });
  const INITIALIZE = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });

  test('no token, a wrong token, a foreign Origin, an oversized or malformed body: each its status', async () => {
    expect((await post({}, INITIALIZE)).status).toBe(401);
    expect((await post({ authorization: 'Bearer psp_wrong' }, INITIALIZE)).status).toBe(401);
    const auth = { authorization: `Bearer ${s.token}` };
    expect((await post({ ...auth, origin: 'http://evil.example' }, INITIALIZE)).status).toBe(403);
    expect((await post(auth, 'x'.repeat(300 * 1024))).status).toBe(413);
    expect((await post(auth, '{"jsonrpc": "2.0", "id": 1, ')).status).toBe(400);
    const client = await s.connect('after the refusals');
    expect((await client.callOk<{ running: number }>('list')).running).toBeGreaterThanOrEqual(0);
  });
});

describe('starting', () => {
  const project = () => tempDir('http-start');

  test('a port in use: refused with what to do', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    try {
      const run = await runPolyspawn(['serve', '--http', '--port', String(port)], project());
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`port ${port} on 127.0.0.1 is in use`);
    } finally {
      blocker.close();
    }
  });

  test('a token file others can read is refused, and used once it is 0600', async () => {
    const dir = project();
    const stateDir = join(dir, '.polyspawn');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(stateDir, { recursive: true });
    writeFileSync(join(stateDir, 'http-token'), 'psp_made_by_hand_0123456789012345678901234567890123\n', {
      mode: 0o644,
    });
    chmodSync(join(stateDir, 'http-token'), 0o644);
    const run = await runPolyspawn(['serve', '--http'], dir);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/can be read or written by other users \(mode 644\).*chmod 600/);
    chmodSync(join(stateDir, 'http-token'), 0o600);
    const server = await startHttpServer({ projectDir: dir });
    try {
      expect(server.token).toBe('psp_made_by_hand_0123456789012345678901234567890123');
      const client = await server.connect();
      expect(await client.callOk('list')).toMatchObject({ running: 0 });
    } finally {
      await server.stop();
    }
  });

  test('another address than loopback needs --allow-remote', async () => {
    const run = await runPolyspawn(['serve', '--http', '--host', '0.0.0.0'], project());
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('add --allow-remote');
  });

  test('a second HTTP server for the same project is refused, naming the first', async () => {
    const run = await runPolyspawn(['serve', '--http'], s.projectDir, serverEnv(s.projectDir));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`already serves this project over HTTP (pid ${s.child.pid}`);
  });
});
