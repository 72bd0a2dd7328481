// Resources and notifications through the SDK's own Client: IAC.md and each agent's record and
// log, the template, list_changed and updated, and job state changes as logging messages.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  LoggingMessageNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string };
type Log = {
  level: string;
  logger?: string;
  data: { agent_id: string; state: string; message: string; task: string; error?: string };
};

let s: TestServer;
const listChanged: number[] = [];
const updated: string[] = [];
const logs: Log[] = [];

beforeAll(async () => {
  s = await startServer();
  s.client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void listChanged.push(Date.now()));
  s.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
  s.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params as Log));
});
afterAll(async () => {
  await s?.close();
});

const iacFile = () => join(s.projectDir, 'IAC.md');
const read = async (uri: string) =>
  (await s.client.readResource({ uri })).contents[0] as { uri: string; mimeType: string; text: string };
const statesOf = (id: string) => logs.filter((l) => l.data.agent_id === id).map((l) => l.data.state);

describe('resources', () => {
  test('the server declares resources with subscribe and listChanged; IAC.md is listed before any agent ran', async () => {
    expect(s.client.getServerCapabilities()?.resources).toEqual({ subscribe: true, listChanged: true });
    const { resources } = await s.client.listResources();
    expect(resources).toEqual([
      expect.objectContaining({ uri: 'polyspawn://IAC.md', name: 'IAC.md', mimeType: 'text/markdown' }),
    ]);
    const iac = await read('polyspawn://IAC.md');
    expect(iac.mimeType).toBe('text/markdown');
    expect(iac.text).toContain('No agent has run in this project yet');
    const { resourceTemplates } = await s.client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate).sort()).toEqual([
      'polyspawn://agents/{agent_id}',
      'polyspawn://agents/{agent_id}/log',
    ]);
  });

  test('an agent: list_changed when it comes, its record and log readable, logging messages for each state', async () => {
    const changesBefore = listChanged.length;
    const job = await s.callOk<Job>('spawn_codex', { prompt: 'resource test [[cli:sleep:100]]', wait_s: 30 });
    expect(job.state).toBe('succeeded');
    const id = job.agent_id;
    await waitFor('list_changed', () => listChanged.length > changesBefore);
    await waitFor('the logging messages', () => statesOf(id).includes('succeeded'));
    // Queued and running are debug messages: sent once the client asks for that level.
    expect(statesOf(id)).toEqual(['succeeded']);
    const done = logs.find((l) => l.data.agent_id === id && l.data.state === 'succeeded')!;
    expect(done).toMatchObject({ level: 'info', logger: 'polyspawn' });
    expect(done.data.message).toMatch(new RegExp(`^agent ${id} \\(codex, gpt-5\\.5\\) succeeded after [\\d.]+ s$`));

    const { resources } = await s.client.listResources();
    const uris = resources.map((r) => r.uri);
    expect(uris).toEqual(
      expect.arrayContaining(['polyspawn://IAC.md', `polyspawn://agents/${id}`, `polyspawn://agents/${id}/log`]),
    );
    const listed = resources.find((r) => r.uri === `polyspawn://agents/${id}`)!;
    expect(listed).toMatchObject({ mimeType: 'application/json', description: 'resource test [[cli:sleep:100]]' });
    expect(listed.title).toContain('succeeded');

    const record = await read(`polyspawn://agents/${id}`);
    expect(record.mimeType).toBe('application/json');
    expect(JSON.parse(record.text)).toMatchObject({
      agent_id: id,
      state: 'succeeded',
      backend: 'codex',
      text: 'FAKE codex: resource test [[cli:sleep:100]]',
      prompt: 'resource test [[cli:sleep:100]]',
    });
    const log = await read(`polyspawn://agents/${id}/log`);
    expect(log.mimeType).toBe('text/plain');
    expect(log.text).toContain('"type":"thread.started"');
    expect(log.text).toContain('FAKE codex: resource test');

    // IAC.md as the writer puts it on disk (a moment after the change: writes are coalesced).
    await waitFor(
      'IAC.md to show the agent',
      () => existsSync(iacFile()) && readFileSync(iacFile(), 'utf8').includes(`### \`${id}\``),
    );
    const iac = await read('polyspawn://IAC.md');
    expect(iac.text).toBe(readFileSync(iacFile(), 'utf8'));
    expect(iac.text).toContain(`### \`${id}\` · codex`);
  });

  test('subscriptions: updated for a subscribed agent on each state change, and for IAC.md when it is rewritten', async () => {
    await s.client.subscribeResource({ uri: 'polyspawn://IAC.md' });
    const job = await s.callOk<Job>('spawn_claude', { prompt: 'subscribe test [[cli:hang]]' });
    const uri = `polyspawn://agents/${job.agent_id}`;
    await s.client.subscribeResource({ uri });
    await s.callOk('cancel', { agent_id: job.agent_id });
    await waitFor('updated for the agent', () => updated.includes(uri));
    await waitFor('updated for IAC.md', () => updated.includes('polyspawn://IAC.md'));
    await waitFor('IAC.md to show the cancelled agent', () =>
      readFileSync(iacFile(), 'utf8').includes(`### \`${job.agent_id}\``),
    );
    expect((await read('polyspawn://IAC.md')).text).toContain(job.agent_id);
    expect(JSON.parse((await read(uri)).text)).toMatchObject({ agent_id: job.agent_id, state: 'cancelled' });
    // A cancelled agent is a notice; the log is not subscribed, so it got no updates.
    await waitFor('the cancelled message', () => statesOf(job.agent_id).includes('cancelled'));
    expect(logs.find((l) => l.data.agent_id === job.agent_id && l.data.state === 'cancelled')!.level).toBe('notice');
    expect(updated).not.toContain(`${uri}/log`);

    await s.client.unsubscribeResource({ uri });
    const before = updated.length;
    const second = await s.callOk<Job>('spawn_claude', { prompt: 'after unsubscribe', wait_s: 30 });
    expect(second.state).toBe('succeeded');
    await waitFor('its final logging message', () => statesOf(second.agent_id).includes('succeeded'));
    expect(updated.slice(before)).not.toContain(uri);
  });

  test('a subscribed agent gets updated when it asks a question, though its state stays running', async () => {
    // It asks a while after it starts: the subscription comes once it runs, so no state change is counted.
    const job = await s.callOk<Job>('spawn_codex', { prompt: 'asks later [[cli:sleep:3000]] [[cli:ask:Which one?]]' });
    const uri = `polyspawn://agents/${job.agent_id}`;
    await waitFor(
      'it to run',
      async () => (await s.callOk<Job>('result', { agent_id: job.agent_id })).state === 'running',
    );
    await s.client.subscribeResource({ uri });
    const before = updated.length;
    const waited = await s.callOk<{ questions?: unknown[] }>('wait_for_agents', {
      agent_ids: [job.agent_id],
      timeout_s: 60,
    });
    expect(waited.questions).toHaveLength(1);
    await waitFor('updated for the question', () => updated.slice(before).includes(uri), 20_000);
    expect((await s.callOk<Job>('result', { agent_id: job.agent_id })).state).toBe('running');
    await s.callOk('reply_subagent', { agent_id: job.agent_id, message_id: 'q1', answer: 'this one' });
    await s.callOk('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: 60 });
    await s.client.unsubscribeResource({ uri });
  });

  test('logging/setLevel debug adds the queued and running messages of each agent; warning leaves out a success', async () => {
    await s.client.setLoggingLevel('debug');
    const verbose = await s.callOk<Job>('spawn_codex', { prompt: 'every state', wait_s: 30 });
    await waitFor('its final logging message', () => statesOf(verbose.agent_id).includes('succeeded'));
    expect(statesOf(verbose.agent_id)).toEqual(['queued', 'running', 'succeeded']);
    expect(logs.find((l) => l.data.agent_id === verbose.agent_id && l.data.state === 'running')!.level).toBe('debug');

    await s.client.setLoggingLevel('warning');
    const quiet = await s.callOk<Job>('spawn_codex', { prompt: 'only trouble', wait_s: 30 });
    const failing = await s.callOk<Job>('spawn_codex', { prompt: 'trouble [[cli:fail]]', wait_s: 30 });
    await waitFor('the failed message', () => statesOf(failing.agent_id).includes('failed'));
    expect(quiet.state).toBe('succeeded');
    expect(statesOf(quiet.agent_id)).toEqual([]);
    await s.client.setLoggingLevel('info');
  });

  test('a failure is a warning, with its error, secrets redacted', async () => {
    const secret = 'sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345';
    const job = await s.callOk<Job>('spawn_claude', { prompt: `use ${secret} [[cli:fail]]`, wait_s: 30 });
    expect(job.state).toBe('failed');
    await waitFor('the failed message', () => statesOf(job.agent_id).includes('failed'));
    const failed = logs.find((l) => l.data.agent_id === job.agent_id && l.data.state === 'failed')!;
    expect(failed.level).toBe('warning');
    expect(failed.data.error).toMatch(/claude reported an error/);
    expect(JSON.stringify(logs)).not.toContain(secret);
    expect(failed.data.task).toContain('[REDACTED]');
    expect((await read(`polyspawn://agents/${job.agent_id}`)).text).not.toContain(secret);
  });

  test('agent ids complete; an unknown agent is an error that says what to do', async () => {
    const job = await s.callOk<Job>('spawn_copilot', { prompt: 'complete me', wait_s: 30 });
    const { completion } = await s.client.complete({
      ref: { type: 'ref/resource', uri: 'polyspawn://agents/{agent_id}' },
      argument: { name: 'agent_id', value: job.agent_id.slice(0, 4) },
    });
    expect(completion.values).toContain(job.agent_id);
    await expect(s.client.readResource({ uri: 'polyspawn://agents/zzzzzz' })).rejects.toThrow(
      /no agent with id "zzzzzz"/,
    );
    await expect(s.client.readResource({ uri: 'polyspawn://agents/zzzzzz/log' })).rejects.toThrow(/no agent with id/);
  });
});

describe('an IAC.md polyspawn did not write', () => {
  test('is left alone; the instructions say where the record goes instead, and the resource serves that', async () => {
    const projectDir = tempDir('foreign-iac');
    const foreign = '# Infrastructure as Code notes\n\nOur Terraform conventions.\n';
    writeFileSync(join(projectDir, 'IAC.md'), foreign);
    const other = await startServer({ projectDir });
    try {
      expect(other.client.getInstructions()).toContain(
        `WARNING: ${join(projectDir, 'IAC.md')} was not written by polyspawn`,
      );
      const job = await other.callOk<Job>('spawn_codex', { prompt: 'beside a foreign IAC.md', wait_s: 30 });
      const elsewhere = join(projectDir, 'IAC.polyspawn.md');
      await waitFor('IAC.polyspawn.md to list the agent', () =>
        existsSync(elsewhere) ? readFileSync(elsewhere, 'utf8').includes(job.agent_id) : false,
      );
      expect(readFileSync(join(projectDir, 'IAC.md'), 'utf8')).toBe(foreign);
      const served = (await other.client.readResource({ uri: 'polyspawn://IAC.md' })).contents[0] as { text: string };
      expect(served.text).toContain(job.agent_id);
    } finally {
      await other.close();
    }
  });
});
