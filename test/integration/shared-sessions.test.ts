// One app, many client sessions (what `serve --http` does): each session's McpServer adds
// listeners to the shared job table and agent registry (notifications, resources, named agents'
// tools), and must take them all away when its session closes: 50 clients that come and go leave
// nothing behind.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test, vi } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { listenHttpMcp } from '../../src/mcp/http/listener.js';
import { createServer } from '../../src/mcp/server.js';
import { httpClient } from '../helpers/http.js';
import { waitFor } from '../helpers/processes.js';

const dir = mkdtempSync(join(tmpdir(), 'polyspawn-shared-sessions-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Counts the subscriptions made through `method` that have not been undone. */
function countSubscriptions(target: object, method: string, live: { count: number }): void {
  const subscribe = (target as Record<string, (listener: unknown) => () => void>)[method]!.bind(target);
  vi.spyOn(target as Record<string, (listener: unknown) => () => void>, method).mockImplementation((listener) => {
    live.count++;
    const off = subscribe(listener);
    return () => {
      live.count--;
      off();
    };
  });
}

test('50 sessions over one app: every listener a session added is gone once it closes', async () => {
  const app: App = createApp(
    { PATH: process.env.PATH!, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg') },
    dir,
    () => true,
  );
  const live = { count: 0 };
  countSubscriptions(app.jobs, 'onChange', live);
  countSubscriptions(app.jobs, 'onStateChange', live);
  countSubscriptions(app.jobs, 'onQuestion', live);
  countSubscriptions(app.agents, 'onChange', live);
  const listener = await listenHttpMcp<string>({
    authenticate: (token) => (token === 'psp_test' ? 'client' : undefined),
    serverFor: () => createServer(app),
    maxSessionsPerPrincipal: 100,
  });
  try {
    const clients = await Promise.all(
      Array.from({ length: 50 }, (_, i) => httpClient(listener.url, 'psp_test', `c${i}`)),
    );
    await Promise.all(clients.map((c) => c.callOk('list')));
    // Four each: resources (changes, questions), notifications (changes, questions); and once
    // for the app, the named agents' tools that every server lists (src/mcp/tools/agent-spawn.ts).
    expect(live.count).toBe(50 * 4 + 1);
    await Promise.all(clients.map((c) => c.close()));
    await waitFor('every session to close', () => live.count === 1);
  } finally {
    await listener.close();
    app.agents.close();
  }
});

test('2026-07-28 requests over one app: the server each one gets leaves no listener behind', async () => {
  const app: App = createApp(
    { PATH: process.env.PATH!, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg-modern') },
    dir,
    () => true,
  );
  const live = { count: 0 };
  countSubscriptions(app.jobs, 'onStateChange', live);
  countSubscriptions(app.jobs, 'onQuestion', live);
  const listener = await listenHttpMcp<string>({
    authenticate: (token) => (token === 'psp_test' ? 'client' : undefined),
    serverFor: () => createServer(app),
    modern: true,
  });
  const envelope = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  try {
    const answers = await Promise.all(
      Array.from({ length: 30 }, async (_, id) => {
        const response = await fetch(listener.url, {
          method: 'POST',
          headers: {
            Authorization: 'Bearer psp_test',
            'Content-Type': 'application/json',
            Accept: 'application/json, text/event-stream',
            'Mcp-Protocol-Version': '2026-07-28',
            'Mcp-Method': 'tools/call',
            'Mcp-Name': 'list',
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id,
            method: 'tools/call',
            params: { name: 'list', arguments: {}, _meta: envelope },
          }),
        });
        return { status: response.status, text: await response.text() };
      }),
    );
    for (const answer of answers) expect(answer, answer.text).toMatchObject({ status: 200 });
    expect(answers.every((a) => a.text.includes('"agents"'))).toBe(true);
    await waitFor('every per-request server to close', () => live.count === 0);
  } finally {
    await listener.close();
    app.agents.close();
  }
});
