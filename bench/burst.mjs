// Bursts (issues 7 and 19): 200 jobs at once with the concurrency limit raised to 200, the run store
// and IAC.md on (the defaults), an instant fake codex (one /bin/sh, test/fakes/instant/codex).
//   throughput   200 / (first spawn call sent → wait_for_agents has returned all 200), beside the
//                rate at which this Node process itself spawns the same 200 fakes at once and reads
//                their output (no server): what the machine allows; target ≥ 0.8 of it
//   status       `list` and `result` calls made back to back during the burst; target: none fails
//   CPU          the server's CPU time per job (user + system), whatever the load; target ≤ 2.5 ms;
//                beside this process's own CPU per job spawning them bare (fork and exec included)
//   memory       the server's peak RSS after the first burst and after five more; target < 90 MiB,
//                and flat: within +5% of the first.
//                Bursts are 2 s apart, as an orchestrator's are (it reads the answers, then sends
//                more): the server collects its garbage once idle for 1 s (src/jobs/idle-gc.ts).
//                BENCH_BURST_PAUSE_MS=0 runs them back to back.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { figure, instantCodex, median, peakRssMiB, report, rssMiB, startServer } from './lib.mjs';

const JOBS = Number(process.env.BENCH_BURST ?? 200);
// BENCH_BURST_MORE=11 runs more bursts, to see where the resident size settles.
const MORE = Number(process.env.BENCH_BURST_MORE ?? 5);
const PAUSE_MS = Number(process.env.BENCH_BURST_PAUSE_MS ?? 2000);
/** /proc's clock ticks per second (USER_HZ: 100 on Linux). */
const CLOCK_TICKS = 100;

/** 200 instant fakes spawned at once from this process, each read to the end: jobs/s. */
/** Jobs/s, and this process's CPU ms per job. */
async function bareBurst(n) {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  await Promise.all(
    Array.from(
      { length: n },
      (_, i) =>
        new Promise((resolve, reject) => {
          const child = spawn(instantCodex, [], { detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
          let out = '';
          child.stdout.on('data', (c) => (out += c));
          child.stderr.resume();
          child.on('error', reject);
          child.on('close', () => (out.includes('turn.completed') ? resolve() : reject(new Error('no result'))));
          child.stdin.end(`burst job ${i}`);
        }),
    ),
  );
  const cpu = process.cpuUsage(cpu0);
  return { rate: (n / (performance.now() - t0)) * 1000, cpuMsPerJob: (cpu.user + cpu.system) / 1000 / n };
}

const server = await startServer({ POLYSPAWN_CONCURRENCY: String(JOBS), POLYSPAWN_CODEX_BIN: instantCodex });
const pid = server.pid;

/** Calls a tool; resolves to the result, never throws (a failure is counted, not fatal). */
const attempt = async (name, args) => {
  try {
    const result = await server.client.callTool({ name, arguments: args }, undefined, { timeout: 600_000 });
    return result;
  } catch (error) {
    return { isError: true, content: [{ type: 'text', text: String(error) }] };
  }
};

/** `list` and `result` back to back, two callers, until `done()`; every answer is checked. */
async function statusLoad(ids, done) {
  const stats = { calls: 0, failed: 0, examples: [] };
  const fail = (what) => {
    stats.failed++;
    if (stats.examples.length < 3) stats.examples.push(what.slice(0, 300));
  };
  const caller = async (n) => {
    for (let i = n; !done(); i++) {
      const useList = i % 2 === 0;
      const id = ids.length ? ids[i % ids.length] : undefined;
      if (!useList && !id) {
        await new Promise((r) => setImmediate(r));
        continue;
      }
      const result = useList ? await attempt('list', { recent: 50 }) : await attempt('result', { agent_id: id });
      stats.calls++;
      const body = result.structuredContent;
      if (result.isError || !body) fail(`${useList ? 'list' : `result ${id}`}: ${JSON.stringify(result.content)}`);
      else if (useList && !Array.isArray(body.agents)) fail(`list: no agents array: ${JSON.stringify(body)}`);
      else if (!useList && (body.agent_id !== id || typeof body.state !== 'string'))
        fail(`result ${id}: ${JSON.stringify(body)}`);
    }
  };
  await Promise.all([caller(0), caller(1)]);
  return stats;
}

/** CPU time (user + system, all threads) the server has used so far, in ms (Linux). */
function serverCpuMs() {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const [utime, stime] = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .slice(11, 13)
    .map(Number);
  return ((utime + stime) * 1000) / CLOCK_TICKS;
}

async function burst(n, withStatus) {
  const ids = [];
  let finished = false;
  const cpu0 = serverCpuMs();
  const t0 = performance.now();
  const status = withStatus ? statusLoad(ids, () => finished) : Promise.resolve(undefined);
  const spawned = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const job = await server.call('spawn_codex', { prompt: `burst job ${i}` });
      ids.push(job.agent_id);
      return job.agent_id;
    }),
  );
  let pending = spawned;
  const states = {};
  while (pending.length) {
    const waited = await server.call('wait_for_agents', { agent_ids: pending, timeout_s: 50 });
    for (const j of waited.finished) states[j.state] = (states[j.state] ?? 0) + 1;
    pending = waited.pending.map((j) => j.agent_id);
  }
  const ms = performance.now() - t0;
  const cpuMsPerJob = (serverCpuMs() - cpu0) / n;
  finished = true;
  return { ms, cpuMsPerJob, states, status: await status };
}

// Warm-up: the first job starts the reaper sidecar and creates the store; not a burst cost.
await server.call('spawn_codex', { prompt: 'warm-up', wait_s: 30 });
const baseline = { peak: peakRssMiB(pid), rss: rssMiB(pid) };

const bareRuns = [await bareBurst(JOBS)];
const first = await burst(JOBS, true);
if (first.states.succeeded !== JOBS) throw new Error(`burst: ${JSON.stringify(first.states)}`);
const afterFirst = { peak: peakRssMiB(pid), rss: rssMiB(pid) };
const later = [];
for (let i = 0; i < MORE; i++) {
  await new Promise((r) => setTimeout(r, PAUSE_MS));
  bareRuns.push(await bareBurst(JOBS));
  const b = await burst(JOBS, true);
  if (b.states.succeeded !== JOBS) throw new Error(`burst ${i + 2}: ${JSON.stringify(b.states)}`);
  later.push({ ...b, peak: peakRssMiB(pid), rss: rssMiB(pid) });
}
const afterAll = later[later.length - 1];

// IAC.md caught up with all of them (coalesced writes), then the server is closed.
const iac = join(server.dir, 'IAC.md');
for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
  if (existsSync(iac) && /Every run is kept/.test(readFileSync(iac, 'utf8'))) break;
  await new Promise((r) => setTimeout(r, 100));
}
const iacOk = existsSync(iac);
await server.close();
rmSync(server.dir, { recursive: true, force: true });

const rates = [first, ...later].map((b) => (JOBS / b.ms) * 1000);
const bare = bareRuns.map((b) => b.rate);
const cpuPerJob = median([first, ...later].map((b) => b.cpuMsPerJob));
const status = [first, ...later].map((b) => b.status);
const calls = status.reduce((s, x) => s + x.calls, 0);
const failed = status.reduce((s, x) => s + x.failed, 0);
const growth = afterAll.peak - afterFirst.peak;

report('burst', [
  figure(`burst: ${JOBS} jobs at once, first burst`, rates[0], 'jobs/s', {
    floor: bare[0],
    ratio: rates[0] / bare[0],
    target: '≥ 0.8x floor (spawned bare from Node)',
    met: rates[0] >= 0.8 * bare[0],
  }),
  figure(`burst: median of all ${1 + MORE} bursts`, median(rates), 'jobs/s', {
    floor: median(bare),
    ratio: median(rates) / median(bare),
    target: '≥ 0.8x floor (spawned bare from Node)',
    met: median(rates) >= 0.8 * median(bare),
  }),
  // Less noisy than the rate on a shared machine: what each job costs the server itself.
  figure('server CPU per job (user + system, median of the bursts)', cpuPerJob, 'ms', {
    floor: median(bareRuns.map((b) => b.cpuMsPerJob)),
    target: '≤ 2.5 ms (floor: CPU per job spawning them bare)',
    met: cpuPerJob <= 2.5,
  }),
  figure('memory: server peak RSS after the first burst', afterFirst.peak, 'MiB', {
    floor: baseline.peak,
    target: '< 90 MiB',
    met: afterFirst.peak < 90,
  }),
  figure(`memory: server peak RSS after ${MORE} more bursts`, afterAll.peak, 'MiB', {
    floor: afterFirst.peak,
    ratio: afterAll.peak / afterFirst.peak,
    target: 'flat: ≤ +5% of the first',
    met: growth <= afterFirst.peak * 0.05,
  }),
  figure(`status under load: failed list/result calls (of ${calls})`, failed, 'calls', {
    target: '0',
    met: failed === 0,
  }),
]);
console.log(
  `bursts (jobs/s): ${rates.map((r) => r.toFixed(0)).join(', ')}; the same spawned from Node without the server: ${bare.map((r) => r.toFixed(0)).join(', ')}; RSS now (MiB): baseline ${baseline.rss.toFixed(1)}, ` +
    `after burst 1 ${afterFirst.rss.toFixed(1)}, after each later burst ${later.map((b) => b.rss.toFixed(1)).join(', ')}; IAC.md written: ${iacOk}`,
);
for (const s of status) for (const e of s.examples) console.log(`  failed: ${e}`);
