// The dashboard's routes over plain HTTP against the built `serve --http` with the fake CLIs: what
// the page's form sends is held to the same limits as the tools (the job table enforces them);
// every route wants the cookie and refuses a foreign Origin; an agent's question is shown as text.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { CONVERSATION_LIMITS } from '../../src/jobs/conversation.js';
import { dashboardCookie, startHttpServer, type HttpTestClient, type HttpTestServer } from '../helpers/http.js';

vi.setConfig({ testTimeout: 120_000 });

/** Long enough that only the behaviour under test ends these waits. */
const LONG_WAIT_S = 60;

type Entry = { kind: string; text: string; message_id?: string };
type Job = { agent_id: string; state: string; text?: string; conversation?: Entry[] };
type Waited = { finished: Job[]; questions?: { agent_id: string; message_id: string }[] };

let server: HttpTestServer;
let mcp: HttpTestClient;
let origin: string;
let cookie: string;

beforeAll(async () => {
  server = await startHttpServer();
  mcp = await server.connect('dashboard-http');
  origin = new URL(server.url).origin;
  cookie = await dashboardCookie(server);
});
afterAll(async () => {
  await server?.stop();
});

const answerFromPage = (agentId: string, messageId: string, answer: string) =>
  fetch(`${origin}/agents/${agentId}/reply`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ message_id: messageId, answer }).toString(),
  });

describe("the dashboard's answer form", () => {
  test('an answer longer than reply_subagent takes is refused with what to change, and nothing is recorded', async () => {
    const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'asks [[cli:ask:Which color?]]' });
    const asked = await mcp.callOk<Waited>('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S });
    const messageId = asked.questions![0]!.message_id;

    const tooLong = 'x'.repeat(CONVERSATION_LIMITS.answerChars + 1);
    const refused = await answerFromPage(job.agent_id, messageId, tooLong);
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain(
      `the answer holds ${CONVERSATION_LIMITS.answerChars + 1} characters, more than the ${CONVERSATION_LIMITS.answerChars} it may: shorten it`,
    );
    const empty = await answerFromPage(job.agent_id, messageId, '');
    expect(empty.status).toBe(400);
    expect(await empty.text()).toContain('the answer is empty');
    const record = await mcp.callOk<Job>('result', { agent_id: job.agent_id });
    expect(record.state).toBe('running');
    expect((record.conversation ?? []).filter((e) => e.kind === 'answer')).toEqual([]);

    // The longest answer the tool takes is taken here too, and the agent carries on with it.
    const longest = `blue ${'y'.repeat(CONVERSATION_LIMITS.answerChars - 5)}`;
    expect((await answerFromPage(job.agent_id, messageId, longest)).status).toBe(303);
    let done: Job | undefined;
    for (let i = 0; i < 3 && !done; i++)
      done = (await mcp.callOk<Waited>('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S }))
        .finished[0];
    expect(done).toMatchObject({ state: 'succeeded' });
    expect(done!.text).toContain('ANSWER blue y');
  });
});

describe('admission', () => {
  test("only the project's token is traded, for a cookie no script can read and no other site can send", async () => {
    for (const given of [`psp_${'x'.repeat(43)}`, `${server.token}x`, '']) {
      const refused = await fetch(`${origin}/?token=${encodeURIComponent(given)}`, { redirect: 'manual' });
      expect(refused.status, given).toBe(401);
      expect(refused.headers.get('set-cookie'), given).toBeNull();
    }
    const traded = await fetch(`${origin}/?token=${encodeURIComponent(server.token)}`, { redirect: 'manual' });
    expect(traded.status).toBe(303);
    // The redirect takes the token out of the address bar.
    expect(traded.headers.get('location')).toBe('/');
    const attributes = traded.headers
      .get('set-cookie')!
      .split(';')
      .map((a) => a.trim());
    expect(attributes.slice(1).sort()).toEqual(['HttpOnly', 'Path=/', 'SameSite=Strict']);
    expect(attributes[0]).not.toContain(server.token);
  });
});

describe("an agent's log on the page", () => {
  test('the stream of an agent that has ended carries its log, then its end, and closes', async () => {
    const job = await mcp.callOk<Job>('spawn_codex', { prompt: 'a short run' });
    const waited = await mcp.callOk<Waited>('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: LONG_WAIT_S });
    expect(waited.finished[0]).toMatchObject({ state: 'succeeded' });
    const res = await fetch(`${origin}/agents/${job.agent_id}/log`, {
      headers: { cookie },
      // Long: only a stream that never closes runs into it.
      signal: AbortSignal.timeout(LONG_WAIT_S * 1000),
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const text = await res.text();
    // A CLI's log goes out as its transcript's steps, rendered: the agent's message among them.
    expect(text).toMatch(
      /event: step\ndata: \{"id":"step-0","html":"<div class=\\"step message\\" id=\\"step-0\\"><p>FAKE codex: a short run/,
    );
    expect(text.endsWith('event: end\ndata: "succeeded"\n\n')).toBe(true);
  });
});

describe("the page's script", () => {
  test('the CSP admits the one inline script by its hash, and no inline handler or other script', async () => {
    const res = await fetch(`${origin}/`, { headers: { cookie } });
    const body = await res.text();
    const scripts = [...body.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
    expect(scripts).toHaveLength(1);
    const hash = createHash('sha256').update(scripts[0]!).digest('base64');
    const scriptSrc = /script-src ([^;]*)/.exec(res.headers.get('content-security-policy') ?? '')?.[1];
    expect(scriptSrc).toBe(`'sha256-${hash}'`);
    expect(body).not.toMatch(/\son[a-z]+=/);
  });
});

describe("a team's page", () => {
  test("shows the team's budget and what its members have left of it", async () => {
    const teamId = (
      await mcp.callOk<{ team_id: string }>('run_team', {
        topology: 'pipeline',
        members: ['claude', 'claude'],
        task: 'x',
        options: { max_budget_usd: 1 },
      })
    ).team_id;
    await mcp.callOk('wait_for_agents', { agent_ids: [teamId], timeout_s: LONG_WAIT_S });
    const page = await (await fetch(`${origin}/teams/${teamId}`, { headers: { cookie } })).text();
    // Two fake claude runs at $0.000188 each: $1 less $0.000376.
    expect(page).toContain('budget $1.00, $1.00 left');
    expect(page).not.toContain('(reached)');
  });
});

/** An agent's question and options as hostile markup: the page must show them as text. */
const HOSTILE_QUESTION = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">';
const HOSTILE_OPTION = '<img src=y onerror=alert(3)>';
const escaped = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

describe('every dashboard route', () => {
  let asking: string;
  /** An agent and a team that have ended: what their cancel buttons post changes nothing. */
  let ended: string;
  let team: string;
  beforeAll(async () => {
    ended = (await mcp.callOk<Job>('spawn_codex', { prompt: 'done', wait_s: LONG_WAIT_S })).agent_id;
    team = (
      await mcp.callOk<{ team_id: string }>('run_team', {
        topology: 'pipeline',
        members: ['codex', 'claude'],
        task: 'x',
      })
    ).team_id;
    await mcp.callOk('wait_for_agents', { agent_ids: [team], timeout_s: LONG_WAIT_S });
    const job = await mcp.callOk<Job>('spawn_codex', {
      prompt: `[[cli:ask:${HOSTILE_QUESTION}]] [[cli:ask-options:${HOSTILE_OPTION}|plain]]`,
    });
    asking = job.agent_id;
    const asked = await mcp.callOk<Waited>('wait_for_agents', { agent_ids: [asking], timeout_s: LONG_WAIT_S });
    expect(asked.questions).toEqual([expect.objectContaining({ agent_id: asking, message_id: 'q1' })]);
  });
  afterAll(async () => {
    await mcp.callOk('cancel', { agent_id: asking });
  });

  /** Each route, and its status for a browser with the cookie on the page's own origin. */
  const routes = (): [method: string, path: string, admitted: number][] => [
    ['GET', '/', 200],
    ['GET', '/events', 200],
    ['GET', '/fragment/active', 200],
    ['GET', '/fragment/history', 200],
    ['GET', '/fragment/cost', 200],
    ['GET', '/fragment/teams', 200],
    ['GET', `/agents/${asking}`, 200],
    ['GET', `/agents/${asking}/log`, 200],
    ['GET', `/agents/${asking}/fragment/record`, 200],
    ['GET', `/agents/${asking}/fragment`, 200],
    // An unknown message: refused by the job table, once admitted.
    ['POST', `/agents/${asking}/reply`, 400],
    // It ran in no worktree: the review says so.
    ['GET', `/agents/${asking}/review`, 200],
    ['GET', `/agents/${asking}/review/fragment/record`, 200],
    // No `how` in the form: refused, once admitted.
    ['POST', `/agents/${asking}/integrate`, 400],
    ['POST', `/agents/${ended}/cancel`, 303],
    ['GET', `/teams/${team}`, 200],
    ['GET', `/teams/${team}/fragment/record`, 200],
    ['POST', `/teams/${team}/cancel`, 303],
  ];

  /** The status and (unless it is an event stream, which never ends) the body; the request is then ended. */
  const request = async (method: string, path: string, headers: Record<string, string>, messageId = 'q9') => {
    const ended = new AbortController();
    try {
      const res = await fetch(`${origin}${path}`, {
        method,
        redirect: 'manual',
        signal: ended.signal,
        headers: { ...headers, ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
        ...(method === 'POST'
          ? { body: new URLSearchParams({ message_id: messageId, answer: 'from elsewhere' }) }
          : {}),
      });
      const streams = res.headers.get('content-type')?.startsWith('text/event-stream');
      return { status: res.status, body: streams ? '' : await res.text(), cookie: res.headers.get('set-cookie') };
    } finally {
      ended.abort();
    }
  };

  test('with the cookie, from the page itself, each is served (the routes below are real)', async () => {
    for (const [method, path, admitted] of routes())
      expect((await request(method, path, { cookie, origin })).status, `${method} ${path}`).toBe(admitted);
  });

  test('without the cookie, or with one this server did not give, each is 401 and shows nothing', async () => {
    const forged = 'polyspawn_dashboard=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const unadmitted: Record<string, string>[] = [{}, { origin }, { cookie: forged }];
    for (const [method, path] of routes())
      for (const headers of unadmitted) {
        const res = await request(method, path, headers);
        expect(res.status, `${method} ${path} ${JSON.stringify(headers)}`).toBe(401);
        expect(res.body).not.toContain(asking);
      }
  });

  test('from a foreign Origin, even with the cookie, each is 403: the token is not traded, an answer not taken', async () => {
    const foreign = { cookie, origin: 'http://evil.example' };
    for (const [method, path] of routes())
      expect((await request(method, path, foreign)).status, `${method} ${path}`).toBe(403);
    const traded = await request('GET', `/?token=${encodeURIComponent(server.token)}`, { origin: foreign.origin });
    expect(traded.status).toBe(403);
    expect(traded.cookie).toBeNull();
    // The open question itself, posted from another site: refused, and still open.
    expect((await request('POST', `/agents/${asking}/reply`, foreign, 'q1')).status).toBe(403);
    const record = await mcp.callOk<Job & { questions?: unknown[] }>('result', { agent_id: asking });
    expect(record.state).toBe('running');
    expect(record.questions).toHaveLength(1);
  });

  test('an id from the URL is looked up only by its pattern and never echoed unescaped; a GET changes nothing', async () => {
    const hostile = ['<img src=x onerror=alert(1)>', 'team-<b>x</b>', '..%2F..%2Fetc'];
    for (const id of hostile)
      for (const path of [`/agents/${id}/review`, `/teams/${id}`, `/agents/${id}/integrate`]) {
        const { status, body } = await request('GET', path, { cookie });
        expect(status, path).toBe(404);
        expect(body, path).not.toContain('<img src=x');
        expect(body, path).not.toContain('<b>x</b>');
      }
    // The actions are POSTs only: a link or an image on another page cannot cancel an agent.
    expect((await request('GET', `/agents/${asking}/cancel`, { cookie })).status).toBe(404);
    expect((await request('GET', `/agents/${asking}/integrate?how=discard`, { cookie })).status).toBe(404);
    expect((await mcp.callOk<Job>('result', { agent_id: asking })).state).toBe('running');
  });

  test("a question's hostile markup is shown as text wherever the page shows it", async () => {
    const pages = ['/', '/fragment/active', `/agents/${asking}`, `/agents/${asking}/fragment/record`];
    for (const path of pages) {
      const { status, body } = await request('GET', path, { cookie });
      expect(status, path).toBe(200);
      expect(body, path).not.toContain(HOSTILE_QUESTION);
      expect(body, path).not.toContain(HOSTILE_OPTION);
      expect(body, path).not.toContain('<img');
      expect(/<span class="question-text">(.*?)<\/span>/.exec(body)?.[1], path).toBe(escaped(HOSTILE_QUESTION));
      expect(body, path).toContain(escaped(HOSTILE_OPTION));
    }
  });
});
