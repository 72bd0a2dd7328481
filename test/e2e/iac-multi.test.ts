// Two servers on one project (Claude Code and VS Code each running one): neither writes IAC.md
// while another holds its lock; each running 100 fake-CLI jobs at once (finishing in a stream),
// every read of IAC.md meanwhile is a whole document, and afterwards IAC.md and the store hold
// all 200, each once.
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { lock } from 'proper-lockfile';
import { describe, expect, onTestFinished, test } from 'vitest';
import { startServer } from '../helpers/mcp.js';
import { parseIac } from '../helpers/iac.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string };

describe('two servers on one project', () => {
  test(
    'neither writes IAC.md while another holds its lock, and both do once it is released',
    { timeout: 120_000 },
    async () => {
      const projectDir = tempDir('multi-lock');
      const iacPath = join(projectDir, 'IAC.md');
      const stateDir = join(projectDir, '.polyspawn');
      const servers = await Promise.all([startServer({ projectDir }), startServer({ projectDir })]);
      // The test takes IAC.md's lock, as a third server would.
      mkdirSync(stateDir, { recursive: true });
      const release = await lock(stateDir, { lockfilePath: join(stateDir, 'iac.lock'), realpath: false, stale: 5000 });
      try {
        // A job each, running 1 s: its changes ask for a write within 200 ms, long before it
        // ends (and a server waits up to ~38 s for the lock).
        const jobs = await Promise.all(
          servers.map((s, n) => s.callOk<Job>('spawn_claude', { prompt: `server ${n} [[cli:sleep:1000]]` })),
        );
        for (const [n, s] of servers.entries()) {
          const waited = await s.callOk<{ finished: Job[] }>('wait_for_agents', {
            agent_ids: [jobs[n]!.agent_id],
            timeout_s: 60,
          });
          expect(waited.finished.map((j) => j.state)).toEqual(['succeeded']);
        }
        expect(existsSync(iacPath)).toBe(false);
        await release();
        await waitFor(
          'IAC.md to show both jobs once the lock is released',
          () => {
            try {
              const shown = parseIac(readFileSync(iacPath, 'utf8')).entries.map((e) => e.id);
              return jobs.every((j) => shown.includes(j.agent_id));
            } catch {
              return false;
            }
          },
          30_000,
        );
      } finally {
        await release().catch(() => undefined);
        await Promise.all(servers.map((s) => s.close()));
      }
    },
  );

  test(
    'each runs 100 jobs at once: every read of IAC.md meanwhile is whole, and afterwards IAC.md and the store hold all 200, each once',
    { timeout: 180_000 },
    async () => {
      const projectDir = tempDir('multi');
      const iacPath = join(projectDir, 'IAC.md');
      const env = { POLYSPAWN_CONCURRENCY: '100' };

      // Read IAC.md over and over while both servers write it, keeping each document seen
      // (parsed afterwards, so that the reads come fast).
      let reading = true;
      const reads = { total: 0, documents: [] as string[] };
      const reader = (async () => {
        while (reading) {
          if (existsSync(iacPath)) {
            const text = readFileSync(iacPath, 'utf8');
            reads.total++;
            if (text !== reads.documents.at(-1)) reads.documents.push(text);
          }
          await new Promise((r) => setImmediate(r));
        }
      })();
      onTestFinished(() => {
        reading = false; // also when the test failed half-way
      });

      const servers = await Promise.all([startServer({ projectDir, env }), startServer({ projectDir, env })]);
      const backends = ['claude', 'codex', 'copilot'];
      const spawned = await Promise.all(
        servers.map((s, n) =>
          Promise.all(
            Array.from({ length: 100 }, (_, i) =>
              s.callOk<Job>(`spawn_${backends[i % 3]}`, {
                prompt: `server ${n} job ${i} [[cli:sleep:${200 + 30 * i}]]`,
              }),
            ),
          ),
        ),
      );
      const ids = spawned.flat().map((j) => j.agent_id);
      expect(new Set(ids).size).toBe(200);
      for (const [n, s] of servers.entries()) {
        const mine = spawned[n]!.map((j) => j.agent_id);
        let pending = mine;
        while (pending.length) {
          const waited = await s.callOk<{ finished: Job[]; pending: Job[] }>('wait_for_agents', {
            agent_ids: pending,
            timeout_s: 50,
          });
          for (const j of waited.finished) expect(j.state, j.agent_id).toBe('succeeded');
          pending = waited.pending.map((j) => j.agent_id);
        }
      }
      // Each server sees the other's jobs too.
      const listed = await servers[0]!.callOk<{ agents: Job[] }>('list', { recent: 1000 });
      expect(new Set(listed.agents.map((a) => a.agent_id))).toEqual(new Set(ids));
      await Promise.all(servers.map((s) => s.close()));
      reading = false;
      await reader;
      // Coalesced: each server wrote IAC.md far fewer times than its 400 job changes (queued,
      // running, process group known, succeeded).
      for (const s of servers) {
        const [, writes, changes] = /IAC\.md: (\d+) writes for (\d+) job changes/.exec(s.stderr()) ?? [];
        expect(Number(changes)).toBe(400);
        expect(Number(writes)).toBeLessThan(100);
      }

      // Every read while the servers ran was a whole document, and none showed fewer finished
      // jobs than the one before it (each write, under the lock, starts from the whole index).
      const failures: string[] = [];
      let before = new Set<string>();
      for (const text of reads.documents) {
        try {
          const shown = new Set(parseIac(text).entries.map((e) => e.id));
          const lost = [...before].filter((id) => !shown.has(id));
          if (lost.length) failures.push(`a later read shows ${lost.length} finished job(s) fewer: ${lost.join(', ')}`);
          before = shown;
        } catch (error) {
          failures.push(`${(error as Error).message}: ${text.length} chars`);
        }
      }
      // What the servers said of the lock, to tell a take-over from another fault if this fails.
      if (failures.length)
        for (const [n, s] of servers.entries())
          failures.push(
            ...s
              .stderr()
              .split('\n')
              .filter((l) => /IAC\.md/.test(l))
              .map((l) => `server ${n}: ${l}`),
          );
      expect(failures).toEqual([]);
      expect(reads.documents.length).toBeGreaterThan(0);

      const parsed = parseIac(readFileSync(iacPath, 'utf8'));
      expect(parsed.active).toEqual([]);
      expect(parsed.entries).toHaveLength(200);
      expect(new Set(parsed.entries.map((e) => e.id))).toEqual(new Set(ids));
      for (const e of parsed.entries) expect(e.heading).toMatch(/succeeded$/);

      const stateDir = join(projectDir, '.polyspawn');
      expect(readdirSync(join(stateDir, 'runs')).sort()).toEqual([...ids].sort());
      for (const id of ids)
        expect(JSON.parse(readFileSync(join(stateDir, 'runs', id, 'record.json'), 'utf8'))).toMatchObject({
          id,
          state: 'succeeded',
        });
      const lines = readFileSync(join(stateDir, 'index.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: string; st: string });
      const finals = lines.filter((l) => l.st === 'succeeded').map((l) => l.id);
      expect(finals).toHaveLength(200);
      expect(new Set(finals)).toEqual(new Set(ids));
      // Each state once at most, in order: queued, running, succeeded. src/jobs/recorder.ts saves a turn's
      // changes once (a job that starts in the turn it was queued in is saved once, as running),
      // but always before its process starts: no job runs, or ends, without its running line,
      // however long a burst's spawns hold off the end of the turn (its CLI reads the prompt from
      // a file, so an instant one can end first).
      const perJob = new Map<string, string[]>();
      for (const l of lines) perJob.set(l.id, [...(perJob.get(l.id) ?? []), l.st]);
      for (const states of perJob.values())
        expect(['queued,running,succeeded', 'running,succeeded']).toContain(states.join(','));
    },
  );
});
