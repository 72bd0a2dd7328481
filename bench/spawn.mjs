// One job (issue 7): a spawn_codex call until wait_for_agents returns the job, against the floor
// of the same fake CLI spawned straight from Node (until its output is read and it exited),
// interleaved so both see the same machine; target at most 1.2x the floor. Measured with both
// fakes: the instant one (one /bin/sh: test/fakes/instant/codex), where the server's own
// overhead shows, and the Node fake the tests use (test/fakes/bin/codex: sh + node), whose
// start-up dwarfs it. Also the server's peak RSS while a job prints 200 MB (target < 150 MiB).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fakeBin, figure, instantCodex, median, peakRssMiB, report, startServer } from './lib.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);

function bareSpawn(file) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(file, ['exec', '--json', '--skip-git-repo-check', '-'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', () =>
      out.includes('turn.completed') ? resolve(performance.now() - t0) : reject(new Error('no result')),
    );
    child.stdin.end('bench prompt');
  });
}

async function throughServer(server) {
  const t0 = performance.now();
  const job = await server.call('spawn_codex', { prompt: 'bench prompt' });
  const waited = await server.call('wait_for_agents', { agent_ids: [job.agent_id], timeout_s: 60 });
  if (waited.finished[0]?.state !== 'succeeded') throw new Error(JSON.stringify(waited));
  return performance.now() - t0;
}

async function oneJob(file, env) {
  const server = await startServer(env);
  await throughServer(server); // warm-up: first-job costs (the store's folders, the reaper) are not per-job
  await bareSpawn(file);
  const bare = [];
  const served = [];
  for (let i = 0; i < RUNS; i++) {
    bare.push(await bareSpawn(file));
    served.push(await throughServer(server));
  }
  return { server, floor: median(bare), served: median(served) };
}

const instant = await oneJob(instantCodex, { POLYSPAWN_CODEX_BIN: instantCodex });
await instant.server.close();
const node = await oneJob(join(fakeBin, 'codex'), {});

const server = node.server;
const before = peakRssMiB(server.pid);
const flood = await server.call('spawn_codex', { prompt: 'flood [[cli:flood:200]]' });
const floodDone = await server.call('wait_for_agents', { agent_ids: [flood.agent_id], timeout_s: 600 });
if (floodDone.finished[0]?.state !== 'succeeded')
  throw new Error(`flood job: ${JSON.stringify(floodDone).slice(0, 300)}`);
const peak = peakRssMiB(server.pid);
await server.close();

const row = (label, r) =>
  figure(`one job: spawn_codex → wait_for_agents, ${label} (median)`, r.served, 'ms', {
    floor: r.floor,
    ratio: r.served / r.floor,
    target: '≤ 1.2x floor (the fake spawned from Node)',
    met: r.served <= 1.2 * r.floor,
  });
report('spawn', [
  row('instant fake (sh)', instant),
  row('Node fake (sh + node)', node),
  figure('server peak RSS while a job prints 200 MB', peak, 'MiB', {
    floor: before,
    target: '< 150 MiB',
    met: peak < 150,
  }),
]);
console.log(`runs: ${RUNS} each, interleaved`);
