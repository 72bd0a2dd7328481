// Change notifications for 2026-07-28 clients (issue 25, item 1): such a client sends no
// resources/subscribe; it opens subscriptions/listen with the URIs it follows, and hears the
// changes on that stream. Over stdio the SDK's entry routes the server's notifications onto it;
// over HTTP (the shared server) each request's server is gone when a job changes, so the entry's
// notifier carries them. Driven with the SDK v2 client on both transports; 2025 clients keep
// resources/subscribe (test/e2e/resources.test.ts).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterEach, describe, expect, test } from 'vitest';
import { serverEnv, startHttpServer, type HttpTestServer } from '../helpers/http.js';
import { serverEntry } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

const MODERN = '2026-07-28';
let ends: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const end of ends.splice(0).reverse()) await end().catch(() => undefined);
});

function modernClient(): Client {
  const client = new Client({ name: 'listen-e2e', version: '1' }, { versionNegotiation: { mode: 'auto' } });
  ends.push(() => client.close());
  return client;
}

const transports = {
  stdio: async () => {
    const projectDir = tempDir('listen-stdio');
    const client = modernClient();
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [serverEntry],
        cwd: projectDir,
        env: serverEnv(projectDir),
        stderr: 'ignore',
      }),
    );
    return client;
  },
  'HTTP (the shared server)': async () => {
    const server: HttpTestServer = await startHttpServer();
    ends.push(() => server.stop());
    const client = modernClient();
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server.url), {
        requestInit: { headers: { Authorization: `Bearer ${server.token}` } },
      }),
    );
    return client;
  },
};

describe.each(Object.entries(transports))('a 2026 client over %s', (_, connect) => {
  test("listens to an agent's resource and to the list: it hears the agent's end and the list's change, and nothing it did not ask for", async () => {
    const client = await connect();
    expect(client.getNegotiatedProtocolVersion()).toBe(MODERN);
    const updated: string[] = [];
    let listChanged = 0;
    client.setNotificationHandler('notifications/resources/updated', (n) => void updated.push(n.params.uri));
    client.setNotificationHandler('notifications/resources/list_changed', () => void listChanged++);

    // Two agents that run until cancelled; the client follows only the first.
    const spawn = async (prompt: string) => {
      const result = await client.callTool({ name: 'spawn_codex', arguments: { prompt } });
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      return (result.structuredContent as { agent_id: string }).agent_id;
    };
    const followed = await spawn('followed [[cli:sleep:120000]]');
    const other = await spawn('not followed [[cli:sleep:120000]]');
    const uri = `polyspawn://agents/${followed}`;
    const subscription = await client.listen({ resourceSubscriptions: [uri], resourcesListChanged: true });
    ends.push(() => subscription.close());
    expect(subscription.honoredFilter).toEqual({ resourceSubscriptions: [uri], resourcesListChanged: true });

    // Ended once the client listens: its end (a state change) reaches the client, and the list's change.
    for (const agent_id of [followed, other]) {
      const cancelled = await client.callTool({ name: 'cancel', arguments: { agent_id } });
      expect(cancelled.isError, JSON.stringify(cancelled.content)).toBeFalsy();
    }
    await waitFor(`resources/updated for ${uri}`, () => updated.includes(uri), 30_000);
    await waitFor('resources/list_changed', () => listChanged > 0, 30_000);
    const waited = await client.callTool({
      name: 'wait_for_agents',
      arguments: { agent_ids: [followed, other], timeout_s: 60 },
    });
    expect((waited.structuredContent as { finished: { state: string }[] }).finished.map((j) => j.state)).toEqual([
      'cancelled',
      'cancelled',
    ]);
    const read = await client.readResource({ uri });
    expect((read.contents[0] as { text: string }).text).toContain('cancelled');
    // Only the URI it listens to: not the other agent's, nor its log's.
    expect(updated.filter((u) => u !== uri)).toEqual([]);
  }, 90_000);
});
