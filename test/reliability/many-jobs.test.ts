// 5,000 jobs through one server (in batches of 100, 50 at a time, with list calls between): once
// past the 1,000 finished jobs the server holds in memory (`list` shows 1,000), its open file
// descriptors and its memory stop growing with the jobs it runs. The jobs run an instant fake
// codex (one /bin/sh), so the server, not Node start-ups of fake CLIs, is what the machine spends
// its time on.
//
// Memory is what the server holds: its live JavaScript heap after a full garbage collection
// (a heap snapshot, asked for with --heapsnapshot-signal, forces one), less compiled code,
// which grows for a while as V8 compiles more of the server and is not held per job. RSS is
// not compared: V8 lets garbage pile up in the old generation until its next major GC, so RSS
// at any moment swings by tens of MiB with GC timing alone, and taking the first snapshot
// itself leaves RSS higher. (bench/burst.mjs reports RSS across bursts.)
//
// The bound is on growth per job between the two measures, not a share of the heap: measured
// here, the held heap moves by about 0.1 MiB either way between snapshots (some 30 bytes a job
// over the 3,500 jobs between them), while a job record kept by mistake costs several KB a job.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { repoRoot } from '../helpers/mcp.js';
import { openFds, startRpcServer, stopAllAndCollectStdoutProblems, type RpcServer } from '../helpers/rpc.js';
import { tempDir } from '../helpers/temp.js';

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

/** After this many jobs the server holds as many finished ones as it ever will. */
const STEADY = 1500;
/** Held heap a job may add once steady: far above the noise, far below a record kept per job. */
const MAX_BYTES_PER_JOB = 512;

describe('5,000 jobs through one server', () => {
  test(
    `file descriptors and memory stop growing once past the first ${STEADY} jobs`,
    { timeout: 900_000 },
    async () => {
      const diagnostics = tempDir('heap');
      const server = await startRpcServer({
        env: {
          POLYSPAWN_CONCURRENCY: '50',
          POLYSPAWN_CODEX_BIN: join(repoRoot, 'test', 'fakes', 'instant', 'codex'),
          NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${diagnostics}`,
        },
      });
      const measure = async () => {
        const { heap, code } = await snapshot(server, diagnostics);
        return { fds: openFds(server.pid), heap, code, held: heap - code };
      };
      let steady: Awaited<ReturnType<typeof measure>> | undefined;
      for (let done = 0; done < TOTAL; done += BATCH) {
        await batch(server, done);
        if (done + BATCH === STEADY) steady = await measure();
      }
      const atEnd = await measure();
      const listed = await server.callOk<{ agents: Job[]; running: number; queued: number }>('list', { recent: 1000 });
      expect(listed).toMatchObject({ running: 0, queued: 0 });
      expect(listed.agents).toHaveLength(1000);
      const show = (m: typeof atEnd) =>
        `${m.fds} fds, ${m.heap.toFixed(2)} MiB live heap of which ${m.code.toFixed(2)} MiB compiled code, ${m.held.toFixed(2)} MiB held`;
      const jobs = TOTAL - STEADY;
      const bytesPerJob = ((atEnd.held - steady!.held) * 2 ** 20) / jobs;
      console.log(
        `after ${STEADY} jobs: ${show(steady!)}; after ${TOTAL}: ${show(atEnd)}; ` +
          `held heap growth over the last ${jobs} jobs: ${((bytesPerJob * 1000) / 2 ** 10).toFixed(1)} KiB per 1,000 jobs ` +
          `(${bytesPerJob.toFixed(0)} bytes a job; the bound is ${MAX_BYTES_PER_JOB})`,
      );
      // A descriptor left open per job would be thousands.
      expect(atEnd.fds).toBeLessThanOrEqual(steady!.fds + 10);
      expect(bytesPerJob).toBeLessThan(MAX_BYTES_PER_JOB);
    },
  );
});
