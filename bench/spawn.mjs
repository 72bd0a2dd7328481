// Spawn-to-result through the MCP server for an instant fake CLI, against a bare spawn of the
// same fake CLI from Node, interleaved so both see the same machine; and the server's peak
// RSS while a job prints 200 MB. Targets: within 1.3x the bare spawn + 20 ms; under 150 MB.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fakeBin, median, peakRssMiB, report, startServer } from './lib.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);

function bareSpawn() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(join(fakeBin, 'codex'), ['exec', '--json', '--skip-git-repo-check', '-'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('error', reject);
    child.on('close', () => (out.includes('turn.completed') ? resolve(performance.now() - t0) : reject(new Error('no result'))));
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

const server = await startServer();
await throughServer(server); // warm-up: first-job costs (log folder, the reaper) are not per-job
await bareSpawn();
const bare = [];
const served = [];
for (let i = 0; i < RUNS; i++) {
  bare.push(await bareSpawn());
  served.push(await throughServer(server));
}
const bareMs = median(bare);
const servedMs = median(served);

const before = peakRssMiB(server.pid);
const flood = await server.call('spawn_codex', { prompt: 'flood [[cli:flood:200]]' });
const floodDone = await server.call('wait_for_agents', { agent_ids: [flood.agent_id], timeout_s: 600 });
if (floodDone.finished[0]?.state !== 'succeeded') throw new Error(`flood job: ${JSON.stringify(floodDone).slice(0, 300)}`);
const peak = peakRssMiB(server.pid);
await server.close();

report('spawn', [
  { figure: 'bare spawn of the fake CLI (median ms)', value: +bareMs.toFixed(1), target: '' },
  { figure: 'spawn_codex → wait_for_agents (median ms)', value: +servedMs.toFixed(1), target: `≤ ${(bareMs * 1.3 + 20).toFixed(1)} (1.3x bare + 20 ms)` },
  { figure: 'ratio served / bare', value: +(servedMs / bareMs).toFixed(2), target: '' },
  { figure: 'server peak RSS before the 200 MB job (MiB)', value: +before.toFixed(1), target: '' },
  { figure: 'server peak RSS after the 200 MB job (MiB)', value: +peak.toFixed(1), target: '< 150' },
]);
console.log(`runs: ${RUNS} each, interleaved; verdict: overhead ${servedMs <= bareMs * 1.3 + 20 ? 'meets' : 'MISSES'} target, RSS ${peak < 150 ? 'meets' : 'MISSES'} target`);
