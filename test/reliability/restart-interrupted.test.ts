// A server is SIGKILLed with a job running and one queued; a new server on the same project says
// so from its very first answer: `result`, `list`, `wait_for_agents` and the agent's resource all
// report both jobs `interrupted`, before the recovery (which writes that under the IAC.md lock)
// has run. The test holds that lock meanwhile, so the recovery cannot have run yet; once it is
// let go, the recovery writes the same end time the first answers gave.
import { appendFileSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lock } from 'proper-lockfile';
import { afterAll, describe, expect, test } from 'vitest';
import { waitFor } from '../helpers/processes.js';
import { startRpcServer, stopAllAndCollectStdoutProblems } from '../helpers/rpc.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string; error?: string; ended_at?: string };

afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
});

describe('a dead server’s jobs after a restart', () => {
  test('interrupted in the first answers, before the recovery has written it', { timeout: 120_000 }, async () => {
    const projectDir = tempDir('restart-interrupted');
    const stateDir = join(projectDir, '.polyspawn');
    const first = await startRpcServer({ projectDir, env: { POLYSPAWN_CONCURRENCY: '1' } });
    const running = await first.callOk<Job>('spawn_claude', { prompt: 'never ends [[cli:hang]]' });
    const queued = await first.callOk<Job>('spawn_codex', { prompt: 'queued behind it' });
    expect(queued.state).toBe('queued');
    const stored = (id: string) =>
      JSON.parse(readFileSync(join(stateDir, 'runs', id, 'record.json'), 'utf8')) as {
        state: string;
        endedAt?: string;
        group?: { start?: string };
      };
    await waitFor('the store to record the running job with its process group', () => {
      try {
        return stored(running.agent_id).group?.start !== undefined && stored(queued.agent_id).state === 'queued';
      } catch {
        return false;
      }
    });
    process.kill(first.pid, 'SIGKILL');
    await first.exited;

    // The recovery runs under this lock (iac/writer.ts): while the test holds it, nothing has
    // written `interrupted` anywhere. (The killed server may have died holding it: stale after 5 s.)
    const release = await lock(stateDir, {
      lockfilePath: join(stateDir, 'iac.lock'),
      realpath: false,
      stale: 5000,
      retries: { retries: 100, minTimeout: 100, maxTimeout: 200 },
    });
    let released = false;
    try {
      const second = await startRpcServer({ projectDir });
      const ids = [running.agent_id, queued.agent_id];
      const results = [];
      for (const id of ids) results.push(await second.callOk<Job>('result', { agent_id: id }));
      const listed = await second.callOk<{ agents: Job[]; running: number; queued: number }>('list', {});
      const waited = await second.callOk<{ finished: Job[]; pending: Job[]; timed_out: boolean }>('wait_for_agents', {
        agent_ids: ids,
        timeout_s: 20,
      });
      const read = await second.request('resources/read', { uri: `polyspawn://agents/${running.agent_id}` });
      const resource = JSON.parse((read.result as { contents: { text: string }[] }).contents[0]!.text) as Job;
      const listedResources = await second.request('resources/list', {});

      for (const job of results) {
        expect(job.state).toBe('interrupted');
        expect(job.error).toMatch(
          /^interrupted: the polyspawn server that ran it \(pid \d+\) ended before it finished/,
        );
      }
      expect(listed).toMatchObject({ running: 0, queued: 0 });
      expect(listed.agents.filter((a) => ids.includes(a.agent_id)).map((a) => a.state)).toEqual([
        'interrupted',
        'interrupted',
      ]);
      expect(waited.pending).toEqual([]);
      expect(waited.timed_out).toBe(false);
      expect(waited.finished.map((j) => [j.agent_id, j.state])).toEqual(ids.map((id) => [id, 'interrupted']));
      expect(resource.state).toBe('interrupted');
      const titles = (listedResources.result as { resources: { title: string }[] }).resources.map((r) => r.title);
      expect(titles.filter((t) => t.startsWith(running.agent_id))).toEqual([
        expect.stringMatching(/ · interrupted$/),
        expect.stringMatching(/ · interrupted · output$/),
      ]);
      // Nothing was written yet: what said interrupted was this server's reading of a dead owner.
      for (const id of ids) expect(stored(id).state).not.toBe('interrupted');

      await release();
      released = true;
      await waitFor(
        'the recovery to write both jobs interrupted',
        () => ids.every((id) => stored(id).state === 'interrupted'),
        30_000,
      );
      // The same end time as the answers before it gave.
      expect(ids.map((id) => stored(id).endedAt)).toEqual(results.map((j) => j.ended_at));
      const again = await second.callOk<Job>('result', { agent_id: running.agent_id });
      expect(again).toMatchObject({ state: 'interrupted', ended_at: results[0]!.ended_at });
    } finally {
      if (!released) await release();
    }
  });
});

describe('a damaged run store after a restart', () => {
  test(
    'list works and shows no phantom run, result says a record is damaged, the log says so once, logs refuse a linked file',
    { timeout: 120_000 },
    async () => {
      const projectDir = tempDir('damaged-store');
      const first = await startRpcServer({ projectDir });
      const kept = await first.callOk<Job>('spawn_codex', { prompt: 'kept', wait_s: 30 });
      const broken = await first.callOk<Job>('spawn_codex', { prompt: 'broken', wait_s: 30 });
      expect(await first.disconnect()).toBe(0);

      const state = join(projectDir, '.polyspawn');
      const index = join(state, 'index.jsonl');
      const line = (fields: Record<string, unknown>) =>
        JSON.stringify({
          id: 'zzzzzz',
          st: 'running',
          b: 'codex',
          m: 'm',
          t: 't',
          c: '2026-01-01T00:00:00Z',
          ...fields,
        });
      appendFileSync(
        index,
        [
          line({ st: 'exploded' }),
          line({ b: undefined }),
          line({ id: 'ab0de1' }),
          '[]',
          '{"id":"zzzzzz","st":"runn',
        ].join('\n') + '\n',
      );
      const record = join(state, 'runs', broken.agent_id, 'record.json');
      writeFileSync(record, readFileSync(record, 'utf8').slice(0, 50));
      // An agent can write its own run folder: its log, replaced by a link to a file of the user's.
      const secret = join(projectDir, 'secret.txt');
      writeFileSync(secret, 'SECRET-CONTENT\n');
      const log = join(state, 'runs', kept.agent_id, 'stdout.log');
      rmSync(log);
      symlinkSync(secret, log);

      const second = await startRpcServer({ projectDir });
      for (let i = 0; i < 3; i++) {
        const listed = await second.callOk<{ agents: Job[]; running: number }>('list');
        expect(listed.agents.map((a) => `${a.agent_id}=${a.state}`).sort()).toEqual(
          [`${kept.agent_id}=succeeded`, `${broken.agent_id}=succeeded`].sort(),
        );
        expect(listed.running).toBe(0);
      }
      const result = await second.call('result', { agent_id: broken.agent_id });
      const text = JSON.stringify(result);
      expect(text).not.toMatch(/no agent with id/);
      expect(text).toMatch(new RegExp(`the record of agent ${broken.agent_id} .* is damaged`));
      expect(result.structuredContent).toMatchObject({ agent_id: broken.agent_id, state: 'succeeded' });
      expect((await second.callOk<Job>('result', { agent_id: kept.agent_id })).state).toBe('succeeded');
      const logs = await second.call('logs', { agent_id: kept.agent_id });
      expect(JSON.stringify(logs)).not.toContain('SECRET-CONTENT');
      await waitFor('the damage to be logged', () => second.stderr().includes('damaged'), 10_000);
      expect(second.stderr().match(/index.jsonl: \d damaged lines? skipped \(lines? [5-9]/g)).toHaveLength(1);
    },
  );
});
