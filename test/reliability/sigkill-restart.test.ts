// The server is SIGKILLed with jobs running (its reaper sidecar too, so the jobs' processes
// outlive it), then restarted on the same project: the jobs it was running or had queued are
// `interrupted` (none stays running), the new server ends what is left of their processes by
// process group, but not a group whose leader's pid now names another process (a reused pid),
// and every job that had finished is intact. (test/e2e/iac-crash.test.ts covers IAC.md during
// a crash; there the reaper ends the processes.)
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { parseIac } from '../helpers/iac.js';
import { markedProcesses } from '../helpers/process-groups.js';
import { isGone, waitFor } from '../helpers/processes.js';
import { fakeCliPids, killReaperThenServer, startRpcServer, stopAllAndCollectStdoutProblems } from '../helpers/rpc.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string; text?: string; error?: string; session_id?: string };

// What this test leaves running on purpose (the jobs' groups once their server is killed, the
// sentinel) carries the test's mark like everything it spawns, so the setup file ends it after
// the test, passed or failed: asserted before the kill, below.
afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
});

describe('SIGKILL with jobs running, then a restart', () => {
  test(
    'interrupted, not running; leftover processes ended by group unless the pid was reused; finished jobs intact',
    { timeout: 120_000 },
    async () => {
      const projectDir = tempDir('sigkill');
      const records = tempDir('sigkill-records');
      const first = await startRpcServer({ projectDir, env: { POLYSPAWN_CONCURRENCY: '4', FAKE_CLI_RECORD: records } });

      // Jobs that finish before the crash, each ending differently.
      const finished: Job[] = [];
      for (const [backend, prompt] of [
        ['claude', 'done: answer me'],
        ['codex', 'done: fail [[cli:fail]]'],
        ['copilot', 'done: answer me too'],
      ] as const) {
        finished.push(await first.callOk<Job>(`spawn_${backend}`, { prompt, wait_s: 30 }));
      }
      expect(finished.map((j) => j.state)).toEqual(['succeeded', 'failed', 'succeeded']);
      const before = await Promise.all(
        finished.map((j) => first.callOk<Job>('result', { agent_id: j.agent_id, include_raw: true })),
      );

      // Four jobs that never end (each with a grandchild), and one queued behind them.
      const stuck: Job[] = [];
      for (let i = 0; i < 4; i++) {
        stuck.push(
          await first.callOk<Job>(`spawn_${['claude', 'codex', 'copilot'][i % 3]}`, {
            prompt: `stuck ${i} [[cli:hang]] [[cli:grandchild:${join(records, `gc-${i}`)}]]`,
          }),
        );
      }
      const queued = await first.callOk<Job>('spawn_codex', { prompt: 'queued behind them' });
      expect(queued.state).toBe('queued');
      await waitFor(
        'the stuck jobs and their grandchildren',
        () => fakeCliPids(records).grandchildren.length === 4 && fakeCliPids(records).leaders.length === 7,
        30_000,
      );
      const leaderOf = (id: string) => {
        const job = JSON.parse(readFileSync(join(projectDir, '.polyspawn', 'runs', id, 'record.json'), 'utf8')) as {
          group?: { pgid: number; start?: string };
        };
        return job.group!;
      };
      await waitFor('the store to record every stuck job with its process group', () => {
        try {
          return stuck.every((j) => leaderOf(j.agent_id).start !== undefined);
        } catch {
          return false;
        }
      });
      const groups = stuck.map((j) => leaderOf(j.agent_id));
      const grandchildren = stuck.map((_, i) => Number(readFileSync(join(records, `gc-${i}`), 'utf8')));
      // Whatever happens from here, test/setup/end-processes.ts ends them: they carry the mark.
      const marked = markedProcesses();
      for (const pid of [...groups.map((g) => g.pgid), ...grandchildren])
        expect(marked, `${pid} unmarked`).toContain(pid);

      await killReaperThenServer(first);
      const processes = [...groups.map((g) => g.pgid), ...grandchildren];
      await new Promise((r) => setTimeout(r, 500));
      for (const pid of processes) expect(isGone(pid), `${pid} outlived the server`).toBe(false);

      // A reused pid: the last stuck job's record now names a live process group that is not its
      // own (same pgid field, but the leader there started at another time).
      const sentinel = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], {
        detached: true,
        stdio: 'ignore',
      });
      expect(markedProcesses(), 'the sentinel is marked').toContain(sentinel.pid);
      const reused = stuck[3]!;
      const recordPath = join(projectDir, '.polyspawn', 'runs', reused.agent_id, 'record.json');
      const record = JSON.parse(readFileSync(recordPath, 'utf8')) as { group: { pgid: number; start: string } };
      record.group.pgid = sentinel.pid!;
      writeFileSync(recordPath, JSON.stringify(record, null, 2));

      const second = await startRpcServer({ projectDir, env: { POLYSPAWN_CONCURRENCY: '4' } });
      const orphans = [...stuck, queued].map((j) => j.agent_id);
      let after: Job[] = [];
      for (const deadline = Date.now() + 30_000; ;) {
        after = await Promise.all(orphans.map((id) => second.callOk<Job>('result', { agent_id: id })));
        if (after.every((j) => j.state === 'interrupted')) break;
        if (Date.now() > deadline) throw new Error(`not recovered: ${after.map((j) => j.state).join(', ')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      for (const job of after)
        expect(job.error).toMatch(
          /^interrupted: the polyspawn server that ran it \(pid \d+\) ended before it finished/,
        );
      const listed = await second.callOk<{ running: number; queued: number; agents: Job[] }>('list', { recent: 50 });
      expect(listed).toMatchObject({ running: 0, queued: 0 });
      expect(listed.agents.filter((a) => a.state === 'running' || a.state === 'queued')).toEqual([]);

      // The new server ended every job's processes: the three groups it could prove were the
      // jobs' own, and the fourth job's by the mark they carry ...
      const ended = [...groups.map((g) => g.pgid), ...grandchildren];
      await waitFor('the leftover processes of the jobs to end', () => ended.every(isGone), 15_000);
      // ... and left the group its record names, now another process's, alone.
      expect(isGone(sentinel.pid!)).toBe(false);

      // Every finished job is intact.
      for (const job of before)
        expect(await second.callOk<Job>('result', { agent_id: job.agent_id, include_raw: true })).toEqual(job);
      let seen = '';
      await waitFor(
        'IAC.md to show all eight jobs, none active',
        () => {
          try {
            const iac = parseIac(readFileSync(join(projectDir, 'IAC.md'), 'utf8'));
            seen = `${iac.entries.length} entries, ${iac.active.length} active`;
            return iac.entries.length === 8 && iac.active.length === 0;
          } catch (error) {
            seen = String(error);
            return false;
          }
        },
        20_000,
      ).catch((error: Error) => {
        throw new Error(`${error.message}: ${seen}`);
      });
    },
  );
});
