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
    // Five each: resources (changes, questions), notifications (changes, questions), named agents.
    expect(live.count).toBe(50 * 5);
    await Promise.all(clients.map((c) => c.close()));
    await waitFor('every session to close', () => live.count === 0);
  } finally {
    await listener.close();
    app.agents.close();
  }
});
