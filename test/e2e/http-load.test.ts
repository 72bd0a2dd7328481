// The shared server (`serve --http`, built) under load one client can make: sessions it opens and
// never ends, and a reader of an agent's log that stops reading. Neither locks other clients out,
// nor makes the server wait or grow without bound.
import { execFileSync } from 'node:child_process';
import { appendFileSync, closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { dashboardCookie, startHttpServer, type HttpTestServer } from '../helpers/http.js';

vi.setConfig({ testTimeout: 180_000 });

/** Long enough that only the behaviour under test ends these waits. */
const LONG_WAIT_S = 120;
/** The shared server's sessions per principal (src/mcp/serve-http.ts), and some more. */
const SESSIONS = 256 + 44;

const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'never-closes', version: '1' } },
});

type Job = { agent_id: string; state: string };

let server: HttpTestServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/** An initialize request, its session never used again and never ended: the status and the session id. */
async function abandonedSession(s: HttpTestServer): Promise<{ status: number; sessionId: string | null }> {
  const res = await fetch(s.url, {
    method: 'POST',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${s.token}` },
    body: INITIALIZE,
  });
  await res.text();
  return { status: res.status, sessionId: res.headers.get('mcp-session-id') };
}

describe('sessions', () => {
  test('300 sessions opened and never ended: a new client still gets in, the oldest idle session makes room, a busy one is kept', async () => {
    server = await startHttpServer();
    const s = server;
    const busy = await s.connect('busy');
    const job = await busy.callOk<Job>('spawn_codex', { prompt: 'runs a while [[cli:hang]]' });
    const waiting = busy.callOk<{ finished: Job[] }>('wait_for_agents', {
      agent_ids: [job.agent_id],
      timeout_s: LONG_WAIT_S,
    });

    const opened: { status: number; sessionId: string | null }[] = [];
    for (let i = 0; i < SESSIONS; i += 20)
      opened.push(...(await Promise.all(Array.from({ length: 20 }, () => abandonedSession(s)))));
    expect(opened.filter((o) => o.status !== 200).map((o) => o.status)).toEqual([]);

    const newcomer = await s.connect('newcomer');
    const listed = await newcomer.callOk<{ agents: Job[] }>('list');
    expect(listed.agents.map((a) => a.agent_id)).toContain(job.agent_id);

    // The first abandoned session was the oldest idle one: ended, and its client told to start again.
    const first = await fetch(s.url, {
      method: 'POST',
      headers: { ...MCP_HEADERS, authorization: `Bearer ${s.token}`, 'mcp-session-id': opened[0]!.sessionId! },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(first.status).toBe(404);
    expect(await first.text()).toContain('Session not found');

    // The busy client's session was kept: its wait still answers, with the agent's end.
    await newcomer.callOk('cancel', { agent_id: job.agent_id });
    const waited = await waiting;
    expect(waited.finished.map((j) => [j.agent_id, j.state])).toEqual([[job.agent_id, 'cancelled']]);
    expect(s.stderr()).toContain('ended, the oldest idle one');
  });
});

/** The dashboard's live log of an agent, as its page opens it: the response, once its headers came. */
async function logStream(s: HttpTestServer, agentId: string): Promise<IncomingMessage> {
  const cookie = await dashboardCookie(s);
  return new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(
      `${new URL(s.url).origin}/agents/${agentId}/log`,
      { headers: { cookie }, agent: false },
      resolve,
    );
    req.on('error', reject).end();
  });
}

/** The process's resident memory now, in bytes. */
const rssOf = (pid: number) =>
  Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

const MiB = 1024 * 1024;
/** The log a slow dashboard reader is given: far more than the bound below. */
const LOG_BYTES = 400 * MiB;
/** What the daemon may grow by while it streams that log to a reader that stopped reading. */
const RSS_GROWTH_BOUND = 150 * MiB;

describe("an agent's log on the dashboard", () => {
  test('a reader that stops reading a 400 MB log: list still answers, and the daemon does not grow past a bound', async () => {
    server = await startHttpServer();
    const s = server;
    const pid = s.child.pid!;
    const mcp = await s.connect('lister');
    const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'hi', wait_s: 60 });
    expect(job.state).toBe('succeeded');
    // The agent printed 400 MB (written here directly: the same file its CLI writes).
    const log = openSync(join(s.projectDir, '.polyspawn', 'runs', job.agent_id, 'stdout.log'), 'w');
    const lines = Buffer.from(`${'the agent said something long '.repeat(33)}\n`.repeat(1024));
    for (let written = 0; written < LOG_BYTES; written += lines.length) writeSync(log, lines);
    closeSync(log);

    await mcp.callOk('list');
    const before = rssOf(pid);

    // The stream opens, its first chunk arrives, and the reader stops reading.
    const stream = await logStream(s, job.agent_id);
    expect(stream.statusCode).toBe(200);
    await new Promise((resolve) => stream.once('data', resolve));
    stream.pause();

    const listed = await mcp.callOk<{ agents: Job[] }>('list');
    expect(listed.agents.map((a) => a.agent_id)).toContain(job.agent_id);
    const whilePaused = rssOf(pid);
    expect(whilePaused - before).toBeLessThan(RSS_GROWTH_BOUND);
    // Still paused, a while later: the server waits for the reader instead of reading on.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    await mcp.callOk('list');
    expect(rssOf(pid) - before).toBeLessThan(RSS_GROWTH_BOUND);

    // Read again, the stream carries the whole log, then its end.
    let received = 0;
    let tail = '';
    stream.on('data', (chunk: Buffer) => {
      received += chunk.length;
      tail = (tail + chunk.toString('latin1')).slice(-200);
    });
    stream.resume();
    await new Promise((resolve) => stream.once('end', resolve));
    expect(received).toBeGreaterThan(LOG_BYTES);
    expect(tail).toContain('event: end\ndata: "succeeded"');
    expect(rssOf(pid) - before).toBeLessThan(RSS_GROWTH_BOUND);
  });
  test('a log that grows while it is streamed: each new line arrives; a FIFO or a folder put in its place holds up nothing; the end comes once the agent ends', async () => {
    server = await startHttpServer();
    const s = server;
    const mcp = await s.connect('watcher');
    const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'keeps running [[cli:hang]]' });
    const file = join(s.projectDir, '.polyspawn', 'runs', job.agent_id, 'stdout.log');
    const stream = await logStream(s, job.agent_id);
    let text = '';
    stream.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    const arrives = async (what: string) => {
      const deadline = Date.now() + 30_000;
      while (!text.includes(what)) {
        expect(Date.now(), `${what} never arrived`).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    for (let i = 1; i <= 3; i++) {
      appendFileSync(file, `grown line ${i}\n`);
      await arrives(`grown line ${i}`);
    }
    // The agent writes its run folder: it puts a FIFO in place of its log. Nobody writes it, so
    // opening it to read would wait for good; the server reads it as no log and serves on.
    rmSync(file);
    execFileSync('mkfifo', [file]);
    await new Promise((resolve) => setTimeout(resolve, 1000)); // the stream looks at the log again
    const listed = await mcp.callOk<{ agents: Job[] }>('list');
    expect(listed.agents.map((a) => a.agent_id)).toContain(job.agent_id);
    // A folder instead: reading it throws (EISDIR), which ended the whole server from the stream's timer.
    rmSync(file);
    mkdirSync(file);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await mcp.callOk<{ agents: Job[] }>('list')).agents.map((a) => a.agent_id)).toContain(job.agent_id);
    await mcp.callOk('cancel', { agent_id: job.agent_id });
    await arrives('event: end\ndata: "cancelled"');
  });
});
