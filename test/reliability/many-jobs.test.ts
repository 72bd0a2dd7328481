// 5,000 jobs through one server (in batches of 100, 50 at a time, with list calls between):
// its open file descriptors and its memory at the end are within 10% of what they were after
// the first 500. The jobs run an instant fake codex (one /bin/sh), so the server, not Node
// start-ups of fake CLIs, is what the machine spends its time on.
//
// Memory is what the server holds: its live JavaScript heap after a full garbage collection
// (a heap snapshot, asked for with --heapsnapshot-signal, forces one), less compiled code,
// which grows for a while as V8 compiles more of the server and is not held per job. RSS is
// not compared: V8 lets garbage pile up in the old generation until its next major GC, so RSS
// at any moment swings by tens of MiB with GC timing alone, and taking the first snapshot
// itself leaves RSS higher. (bench/burst.mjs reports RSS across bursts.)
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { repoRoot } from '../helpers/mcp.js';
import { openFds, startRpcServer, stopAllAndCollectStdoutProblems, type RpcServer } from '../helpers/rpc.js';

type Job = { agent_id: string; state: string };

const TOTAL = 5000;
const BATCH = 100;

afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
});

async function batch(server: RpcServer, from: number): Promise<void> {
  const ids = await Promise.all(
    Array.from({ length: BATCH }, (_, i) =>
      server.callOk<Job>('spawn_codex', { prompt: `job ${from + i}` }).then((j) => j.agent_id),
    ),
  );
  let pending = ids;
  while (pending.length) {
    const waited = await server.callOk<{ finished: Job[]; pending: Job[] }>('wait_for_agents', {
      agent_ids: pending,
      timeout_s: 50,
    });
    for (const job of waited.finished) expect(job.state, job.agent_id).toBe('succeeded');
    pending = waited.pending.map((j) => j.agent_id);
  }
  await server.callOk('list', { recent: 50 });
}

/** The live heap in MiB, and the part of it that is compiled code; taking it forces a full GC. */
async function snapshot(server: RpcServer, dir: string): Promise<{ heap: number; code: number }> {
  const before = new Set(readdirSync(dir));
  process.kill(server.pid, 'SIGUSR2');
  let file = '';
  let size = -1;
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 250));
    file ||= readdirSync(dir).find((f) => !before.has(f) && f.endsWith('.heapsnapshot')) ?? '';
    if (!file) continue;
    const now = statSync(join(dir, file)).size;
    if (now > 0 && now === size) break;
    size = now;
  }
  const snap = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
  };
  const { node_fields: fields, node_types: types } = snap.snapshot.meta;
  const [type, selfSize] = [fields.indexOf('type'), fields.indexOf('self_size')];
  let heap = 0;
  let code = 0;
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    heap += snap.nodes[i + selfSize]!;
    if (types[0][snap.nodes[i + type]!] === 'code') code += snap.nodes[i + selfSize]!;
  }
  return { heap: heap / 2 ** 20, code: code / 2 ** 20 };
}

describe('5,000 jobs through one server', () => {
  test(
    'file descriptors and memory at the end are within 10% of where they were after the first 500',
    { timeout: 400_000 },
    async () => {
      const diagnostics = mkdtempSync(join(tmpdir(), 'polyspawn-heap-'));
      const server = await startRpcServer({
        env: {
          POLYSPAWN_CONCURRENCY: '50',
          POLYSPAWN_CODEX_BIN: join(repoRoot, 'test', 'fakes', 'instant', 'codex'),
          NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${diagnostics}`,
        },
      });
      const measure = async () => ({ fds: openFds(server.pid), ...(await snapshot(server, diagnostics)) });
      let at500 = { fds: 0, heap: 0, code: 0 };
      for (let done = 0; done < TOTAL; done += BATCH) {
        await batch(server, done);
        if (done + BATCH === 500) at500 = await measure();
      }
      const atEnd = await measure();
      const listed = await server.callOk<{ agents: Job[]; running: number; queued: number }>('list', { recent: 1000 });
      expect(listed).toMatchObject({ running: 0, queued: 0 });
      expect(listed.agents).toHaveLength(1000);
      const show = (m: typeof atEnd) =>
        `${m.fds} fds, ${m.heap.toFixed(1)} MiB live heap of which ${m.code.toFixed(1)} MiB compiled code`;
      console.log(`after 500 jobs: ${show(at500)}; after ${TOTAL}: ${show(atEnd)}`);
      expect(atEnd.fds).toBeLessThanOrEqual(Math.floor(at500.fds * 1.1));
      expect(atEnd.heap - atEnd.code).toBeLessThanOrEqual((at500.heap - at500.code) * 1.1);
    },
  );
});
