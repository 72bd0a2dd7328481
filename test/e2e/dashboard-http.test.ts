// The dashboard's routes over plain HTTP against the built `serve --http` with the fake CLIs: what
// the page's form sends is held to the same limits as the tools (the job table enforces them).
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
