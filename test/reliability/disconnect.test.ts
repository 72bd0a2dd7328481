// The client goes away with 10 jobs running: the server exits by itself, no process of any job
// (leaders, the grandchildren they started, one that ignores SIGTERM) is left, and the jobs are
// on record as cancelled. (test/e2e/shutdown.test.ts covers SIGTERM and SIGKILL with fewer.)
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { isGone, waitFor, waitGone } from '../helpers/processes.js';
import { fakeCliPids, startRpcServer, stopAllAndCollectStdoutProblems } from '../helpers/rpc.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string; error?: string };

afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
});

describe('the client disconnects with 10 jobs running', () => {
  test(
    'the server exits, no process of any job is left, and every job is recorded cancelled',
    { timeout: 90_000 },
    async () => {
      const projectDir = tempDir('disconnect');
      const records = tempDir('disconnect-records');
      const server = await startRpcServer({
        projectDir,
        env: { POLYSPAWN_CONCURRENCY: '10', FAKE_CLI_RECORD: records, POLYSPAWN_KILL_GRACE_S: '1' },
      });
      const backends = ['claude', 'codex', 'copilot'];
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) {
        // Two ignore SIGTERM: only the grace period's SIGKILL ends them.
        const behaviour = i < 2 ? '[[cli:ignore-term]]' : '[[cli:hang]]';
        const job = await server.callOk<Job>(`spawn_${backends[i % 3]}`, {
          prompt: `job ${i} ${behaviour} [[cli:grandchild:${join(records, `gc-${i}`)}]]`,
        });
        ids.push(job.agent_id);
      }
      await waitFor(
        'all 10 jobs and their grandchildren to run',
        () => {
          const { leaders, grandchildren } = fakeCliPids(records);
          return leaders.length === 10 && grandchildren.length === 10;
        },
        30_000,
      );
      const { leaders, grandchildren } = fakeCliPids(records);
      const pids = [...leaders, ...grandchildren];
      for (const pid of pids) expect(isGone(pid), `${pid} runs before the disconnect`).toBe(false);
      const listed = await server.callOk<{ running: number }>('list');
      expect(listed.running).toBe(10);

      const disconnectedAt = Date.now();
      expect(await server.disconnect()).toBe(0);
      // Within the grace period (1 s) plus the IAC.md flush; the bound only guards against a hang.
      expect(Date.now() - disconnectedAt).toBeLessThan(20_000);
      await waitFor('every job process to be gone', () => pids.every(isGone), 10_000);
      expect(pids.filter((pid) => !isGone(pid))).toEqual([]);

      // On record: a new server on the project answers for each job, and none is left running.
      const next = await startRpcServer({ projectDir });
      for (const id of ids) {
        const job = await next.callOk<Job>('result', { agent_id: id });
        expect(job.state, id).toBe('cancelled');
      }
      const after = await next.callOk<{ running: number; queued: number; agents: Job[] }>('list', { recent: 50 });
      expect(after).toMatchObject({ running: 0, queued: 0 });
      expect(after.agents.map((a) => a.state)).toEqual(Array(10).fill('cancelled'));
      expect(readdirSync(join(projectDir, '.polyspawn', 'runs')).sort()).toEqual([...ids].sort());
    },
  );
});

describe('the transport closes for any reason', () => {
  /** A server with one agent running (it hangs), and that agent's pid. */
  async function serverWithAgent() {
    const records = tempDir('transport-records');
    const server = await startRpcServer({ env: { FAKE_CLI_RECORD: records } });
    const job = await server.callOk<Job>('spawn_codex', { prompt: '[[cli:hang]]' });
    await waitFor('the agent to run', () => fakeCliPids(records).leaders.length === 1, 30_000);
    return { server, job, agent: fakeCliPids(records).leaders[0]! };
  }

  test('stdin closed after a line past the read limit: the server and its agent end', { timeout: 90_000 }, async () => {
    const { server, agent } = await serverWithAgent();
    const id = server.nextId();
    const line = Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":${id},"params":"`), Buffer.alloc(12 << 20, 'a')]);
    const answer = await server.requestRaw(id, Buffer.concat([line, Buffer.from('"}')]));
    expect(answer.error?.code).toBe(-32600);
    expect(await server.disconnect()).toBe(0);
    await waitGone(agent, 20_000);
  });

  test(
    'the client stops reading stdout (EPIPE on the next answer): the server and its agent end',
    { timeout: 90_000 },
    async () => {
      const { server, job, agent } = await serverWithAgent();
      server.child.stdout.destroy();
      // The answer finds no reader: EPIPE; stdin stays open.
      server.child.stdin.write(
        `${JSON.stringify({ jsonrpc: '2.0', id: server.nextId(), method: 'tools/call', params: { name: 'list', arguments: {} } })}\n`,
      );
      expect(await server.exited).toBe(0);
      await waitGone(agent, 20_000);
      const next = await startRpcServer({ projectDir: server.projectDir });
      expect((await next.callOk<Job>('result', { agent_id: job.agent_id })).state).toBe('cancelled');
    },
  );
});
