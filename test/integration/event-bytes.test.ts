// What the shared server's resumable streams keep of what a client reads, through the server as
// `serve --http` builds it (one app, a McpServer per session, resumable streams): 150 pages of a
// log, a MiB each, leave no more than the event store's byte bound in memory, and a resume after
// a page no longer kept is refused, saying so.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, expect, test, vi } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { DEFAULT_EVENT_LIMITS } from '../../src/mcp/http/event-store.js';
import { listenHttpMcp } from '../../src/mcp/http/listener.js';
import { createServer } from '../../src/mcp/server.js';
import { runFolder } from '../../src/lib/run-folder.js';
import { httpClient } from '../helpers/http.js';
import { fakeBinDir } from '../helpers/mcp.js';

vi.setConfig({ testTimeout: 180_000 });

const dir = mkdtempSync(join(tmpdir(), 'polyspawn-event-bytes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MiB = 1024 * 1024;
const TOKEN = 'psp_test';
/** The protocol version whose streams start with an event id (resumable). */
const RESUMABLE_VERSION = '2025-11-25';
const headers = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  authorization: `Bearer ${TOKEN}`,
  'mcp-protocol-version': RESUMABLE_VERSION,
};

/** The SSE ids and data lines of a response body. */
const sse = (text: string) => ({
  ids: [...text.matchAll(/^id: (.+)$/gm)].map((m) => m[1]!),
  data: [...text.matchAll(/^data: (.+)$/gm)].map((m) => m[1]!),
});

test('150 log pages of a MiB: the event store keeps at most its bound, and a resume past what it dropped is refused', async () => {
  const app: App = createApp(
    {
      PATH: `${fakeBinDir}${delimiter}${process.env.PATH}`,
      HOME: dir,
      XDG_CONFIG_HOME: join(dir, 'xdg'),
    },
    dir,
    () => true,
  );
  const listener = await listenHttpMcp<string>({
    authenticate: (token) => (token === TOKEN ? 'client' : undefined),
    serverFor: () => createServer(app),
    resumableStreams: true,
    maxSessionsPerPrincipal: 10,
  });
  try {
    const mcp = await httpClient(listener.url, TOKEN, 'spawner');
    const job = await mcp.callOk<{ agent_id: string; state: string }>('spawn_codex', { prompt: 'hi', wait_s: 60 });
    expect(job.state).toBe('succeeded');
    await mcp.close();
    // A MiB of log lines, as an agent could print.
    writeFileSync(runFolder(app.config.stateDir, job.agent_id).stdout, `${'y'.repeat(1023)}\n`.repeat(1024));

    const opened = await fetch(listener.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: RESUMABLE_VERSION, capabilities: {}, clientInfo: { name: 'reader', version: '1' } },
      }),
    });
    await opened.text();
    const session = { ...headers, 'mcp-session-id': opened.headers.get('mcp-session-id')! };
    const firstIds: string[] = [];
    for (let i = 1; i <= 150; i++) {
      const page = await fetch(listener.url, {
        method: 'POST',
        headers: session,
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: i,
          method: 'tools/call',
          params: { name: 'logs', arguments: { agent_id: job.agent_id, limit: MiB } },
        }),
      });
      const { ids, data } = sse(await page.text());
      expect(data.at(-1)!.length).toBeGreaterThan(MiB);
      firstIds.push(ids[0]!);
    }
    // The first page's stream is no longer kept: a resume after it is refused, saying why.
    const resumeFirst = await fetch(listener.url, {
      headers: { ...session, accept: 'text/event-stream', 'last-event-id': firstIds[0]! },
    });
    expect(resumeFirst.status).toBe(400);
    expect(await resumeFirst.text()).toContain('Last-Event-ID names an event this server no longer keeps');
    expect(listener.storedEventBytes()).toBeLessThanOrEqual(DEFAULT_EVENT_LIMITS.sessionBytes);
    expect(listener.storedEventBytes()).toBeGreaterThan(MiB);

    // The newest page is kept: resumed after its first event, its answer comes again.
    const resumeLast = await fetch(listener.url, {
      headers: { ...session, accept: 'text/event-stream', 'last-event-id': firstIds.at(-1)! },
    });
    expect(resumeLast.status).toBe(200);
    const reader = resumeLast.body!.getReader();
    let replay = '';
    while (!replay.includes('"id":150')) replay += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
  } finally {
    await listener.close();
    app.agents.close();
  }
});
