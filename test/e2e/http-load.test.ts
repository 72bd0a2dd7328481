// The shared server (`serve --http`, built) under load one client can make: sessions it opens and
// never ends, and a reader of an agent's log that stops reading. Neither locks other clients out,
// nor makes the server wait or grow without bound.
import { afterEach, describe, expect, test, vi } from 'vitest';
import { startHttpServer, type HttpTestServer } from '../helpers/http.js';

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
