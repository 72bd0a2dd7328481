// Two servers on one project (Claude Code and VS Code each running one), each running 100
// fake-CLI jobs at once: IAC.md and the store hold all 200, each once, and IAC.md parses.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { startServer } from '../helpers/mcp.js';
import { parseIac } from '../helpers/iac.js';

type Job = { agent_id: string; state: string };

describe('two servers on one project', () => {
  test(
    'each runs 100 jobs at once; afterwards IAC.md and the store hold all 200, each once',
    { timeout: 180_000 },
    async () => {
      const projectDir = mkdtempSync(join(tmpdir(), 'polyspawn-multi-'));
      const env = { POLYSPAWN_CONCURRENCY: '100' };
      const servers = await Promise.all([startServer({ projectDir, env }), startServer({ projectDir, env })]);
      const backends = ['claude', 'codex', 'copilot'];
      const spawned = await Promise.all(
        servers.map((s, n) =>
          Promise.all(
            Array.from({ length: 100 }, (_, i) =>
              s.callOk<Job>(`spawn_${backends[i % 3]}`, { prompt: `server ${n} job ${i} [[cli:sleep:200]]` }),
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
      // Coalesced: each server wrote IAC.md far fewer times than its 400 job changes (queued,
      // running, process group known, succeeded).
      for (const s of servers) {
        const [, writes, changes] = /IAC\.md: (\d+) writes for (\d+) job changes/.exec(s.stderr()) ?? [];
        expect(Number(changes)).toBe(400);
        expect(Number(writes)).toBeLessThan(100);
      }

      const parsed = parseIac(readFileSync(join(projectDir, 'IAC.md'), 'utf8'));
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
      // Each state once at most: queued, running, succeeded. A job that starts in the turn it was
      // queued in is saved once as running (iac/runtime.ts coalesces a turn's changes).
      const perJob = new Map<string, string[]>();
      for (const l of lines) perJob.set(l.id, [...(perJob.get(l.id) ?? []), l.st]);
      for (const states of perJob.values())
        expect(['queued,running,succeeded', 'running,succeeded']).toContain(states.join(','));
    },
  );
});
