// A server killed with SIGKILL in the middle of a burst: IAC.md is never half-written, the
// next server marks what was running or queued `interrupted`, and every finished job is kept.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { startServer } from '../helpers/mcp.js';
import { parseIac } from '../helpers/iac.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string; text?: string; error?: string };

describe('a server killed in the middle of a burst', () => {
  test(
    'IAC.md stays whole, running and queued jobs become interrupted, finished ones stay',
    { timeout: 120_000 },
    async () => {
      const projectDir = tempDir('crash');
      const iacPath = join(projectDir, 'IAC.md');

      // Read IAC.md over and over while everything happens: every read must parse.
      let reading = true;
      const reads = { total: 0, parsed: 0, failures: [] as string[] };
      const reader = (async () => {
        while (reading) {
          if (existsSync(iacPath)) {
            const text = readFileSync(iacPath, 'utf8');
            reads.total++;
            try {
              parseIac(text);
              reads.parsed++;
            } catch (error) {
              reads.failures.push(`${(error as Error).message}: ${text.length} chars`);
            }
          }
          await new Promise((r) => setImmediate(r));
        }
      })();

      const first = await startServer({
        projectDir,
        env: { POLYSPAWN_CONCURRENCY: '20', POLYSPAWN_KILL_GRACE_S: '1' },
      });
      const backends = ['claude', 'codex', 'copilot'];
      const quick: string[] = [];
      const stuck: string[] = [];
      for (let i = 0; i < 40; i++) {
        // Quick jobs finish in a stream during the burst; the others never finish on their own.
        const prompt = i % 2 === 0 ? `crash quick ${i} [[cli:sleep:${100 + i * 40}]]` : `crash stuck ${i} [[cli:hang]]`;
        const job = await first.callOk<Job>(`spawn_${backends[i % 3]}`, { prompt });
        (i % 2 === 0 ? quick : stuck).push(job.agent_id);
      }
      // Some quick jobs have finished (others are still running or queued behind the stuck ones).
      const some = await first.callOk<{ finished: Job[] }>('wait_for_agents', {
        agent_ids: quick,
        return_when: 'any',
        timeout_s: 30,
      });
      const finishedBefore = some.finished.map((j) => j.agent_id);
      expect(finishedBefore.length).toBeGreaterThan(0);
      await waitFor(
        'IAC.md to show a finished job',
        () => existsSync(iacPath) && readFileSync(iacPath, 'utf8').includes(finishedBefore[0]!),
        20_000,
      );
      const listed = await first.callOk<{ agents: Job[]; running: number; queued: number }>('list');
      expect(listed.queued).toBeGreaterThan(0);
      process.kill(first.transport.pid!, 'SIGKILL');
      await first.close().catch(() => undefined);

      const second = await startServer({ projectDir, env: { POLYSPAWN_CONCURRENCY: '20' } });
      const all = [...quick, ...stuck];
      // The second server recovers in the background after the handshake: ask until it has.
      let after: Job[] = [];
      for (const deadline = Date.now() + 30_000; ;) {
        after = await Promise.all(all.map((id) => second.callOk<Job>('result', { agent_id: id })));
        if (after.every((j) => j.state === 'succeeded' || j.state === 'interrupted')) break;
        if (Date.now() > deadline) throw new Error(`not recovered: ${after.map((j) => j.state).join(',')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const byId = Object.fromEntries(after.map((j) => [j.agent_id, j]));
      for (const id of stuck) expect(byId[id]!.state, id).toBe('interrupted');
      for (const id of finishedBefore)
        expect(byId[id], id).toMatchObject({ state: 'succeeded', text: expect.stringContaining('crash quick') });
      expect(byId[stuck[0]!]!.error).toMatch(
        /interrupted: the polyspawn server that ran it \(pid \d+\) ended before it finished/,
      );
      const interrupted = after.filter((j) => j.state === 'interrupted').map((j) => j.agent_id);
      expect(interrupted.length).toBeGreaterThan(stuck.length); // queued quick ones too

      await waitFor(
        'IAC.md to show all 40 jobs, none active',
        () => {
          try {
            const parsed = parseIac(readFileSync(iacPath, 'utf8'));
            return parsed.entries.length === 40 && parsed.active.length === 0;
          } catch {
            return false;
          }
        },
        30_000,
      );
      await second.close();
      reading = false;
      await reader;

      const parsed = parseIac(readFileSync(iacPath, 'utf8'));
      expect(new Set(parsed.entries.map((e) => e.id))).toEqual(new Set(all));
      for (const id of interrupted) expect(parsed.entries.find((e) => e.id === id)!.heading).toMatch(/interrupted$/);
      expect(reads.failures).toEqual([]);
      expect(reads.parsed).toBeGreaterThan(10);
    },
  );
});
