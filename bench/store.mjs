// The run store and IAC.md against the size of the history. In one run, interleaved: the cost
// of recording one finished job (its three state changes in the store, then the IAC.md write
// that shows it) when the store holds 10 runs and when it holds 10,000; target: the ratio
// under 2x (the cost must not grow with the history). Also: the bytes of IAC.md at 10,000 runs
// (bounded by N entries, not by the history), the time to load a 10,000-run history, and the
// server's `initialize` time with that history against an empty store. And at 100,000 runs against
// 10,000, with index.jsonl compacted as a server leaves it (iac/index-file.ts): the history's
// load as a server holds it, the server's start, its first `list` and its resident memory;
// target: each within 1.2x.
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { jobId, median, report, root, rssMiB, serverEntry } from './lib.mjs';

const dist = (p) => import(pathToFileURL(join(root, 'dist', p)).href);
const { RunStore } = await dist('iac/store.js');
const { IacWriter } = await dist('iac/writer.js');
const { Redactor } = await dist('src/lib/redact.js');
const { backends } = await dist('backends/registry.js');

const RUNS = Number(process.env.BENCH_RUNS ?? 60);
const ENTRIES = 200;
const STATES = ['succeeded', 'succeeded', 'succeeded', 'failed', 'timed_out', 'cancelled', 'interrupted'];

/**
 * A project whose store holds `n` finished runs, written directly (as a store would leave them);
 * record files for the newest `records` only (the rest are read only by `result` on them).
 */
function project(n, records = n) {
  const dir = mkdtempSync(join(tmpdir(), `polyspawn-bench-store-${n}-`));
  const state = join(dir, '.polyspawn');
  mkdirSync(join(state, 'runs'), { recursive: true });
  const lines = [];
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  for (let i = 0; i < n; i++) {
    const id = jobId('h', i);
    const created = new Date(t0 + i * 60_000).toISOString();
    const started = new Date(t0 + i * 60_000 + 100).toISOString();
    const ended = new Date(t0 + i * 60_000 + 30_000).toISOString();
    const st = STATES[i % STATES.length];
    const prompt = `Task ${i}: review src/module${i}.ts and fix the failing test\n\nDetails: ${'lorem ipsum '.repeat(20)}`;
    const record = {
      v: 1,
      id,
      backend: 'claude',
      model: 'sonnet',
      prompt,
      cwd: dir,
      timeoutS: 1800,
      extra: {},
      state: st,
      createdAt: created,
      startedAt: started,
      endedAt: ended,
      exitCode: st === 'succeeded' ? 0 : 1,
      outcome: {
        ok: st === 'succeeded',
        text: `Answer ${i}: ${'done. '.repeat(80)}`,
        ...(st === 'succeeded' ? {} : { error: 'it failed' }),
        costSource: 'reported',
        costUsd: 0.0123,
        usage: { inputTokens: 1200, outputTokens: 700, cachedInputTokens: 0 },
        sessionId: `s-${i}`,
      },
      owner: { pid: 1, start: 'x:1' },
    };
    if (i >= n - records) {
      mkdirSync(join(state, 'runs', id));
      writeFileSync(join(state, 'runs', id, 'record.json'), JSON.stringify(record, null, 2));
      writeFileSync(join(state, 'runs', id, 'prompt.txt'), prompt);
    }
    // Keys in the store's own order: id and st first.
    const base = {
      id,
      st: '',
      b: 'claude',
      m: 'sonnet',
      t: `Task ${i}: review src/module${i}.ts and fix the failing test`,
      c: created,
    };
    lines.push(
      JSON.stringify({ ...base, st: 'queued', p: 1, ps: 'x:1' }),
      JSON.stringify({ ...base, st: 'running', s: started, p: 1, ps: 'x:1' }),
      JSON.stringify({ ...base, st, s: started, e: ended, usd: 0.0123, cs: 'reported', in: 1200, out: 700 }),
    );
  }
  writeFileSync(join(state, 'index.jsonl'), lines.length ? `${lines.join('\n')}\n` : '');
  return { dir, state, iac: join(dir, 'IAC.md') };
}

function open(p, keepFinished) {
  const store = new RunStore({
    ...(keepFinished ? { keepFinished } : {}),
    stateDir: p.state,
    redactor: new Redactor(
      ['bench-secret-value'],
      backends.flatMap((b) => b.secretPatterns),
    ),
    identity: { pid: process.pid, start: 'bench' },
  });
  const writer = new IacWriter(store, { file: p.iac, entries: ENTRIES, debounceMs: 0 });
  return { store, writer };
}

let seq = 0;
/** One job, queued → running → succeeded, then the IAC.md write that shows it. */
async function recordOne({ store, writer }) {
  const id = jobId('b', seq++);
  const job = {
    id,
    backend: 'codex',
    model: 'gpt-5.5',
    prompt: `bench job ${id}\nwith a second line`,
    cwd: '/tmp',
    timeoutS: 60,
    extra: {},
    state: 'queued',
    createdAt: new Date().toISOString(),
  };
  const t0 = performance.now();
  store.claimId(id);
  store.save(job);
  job.state = 'running';
  job.startedAt = new Date().toISOString();
  store.save(job);
  job.state = 'succeeded';
  job.endedAt = new Date().toISOString();
  job.outcome = {
    ok: true,
    text: `answer for ${id}`,
    costSource: 'estimated',
    costUsd: 0.0001,
    usage: { inputTokens: 12, outputTokens: 7, cachedInputTokens: 0 },
  };
  store.save(job);
  const t1 = performance.now();
  writer.schedule();
  await writer.flush();
  const t2 = performance.now();
  return { store: t1 - t0, iac: t2 - t1, total: t2 - t0 };
}

async function initializeMs(stateDir, options = {}) {
  const t0 = performance.now();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [serverEntry],
    env: {
      ...process.env,
      POLYSPAWN_STATE_DIR: stateDir,
      POLYSPAWN_IAC_FILE: join(stateDir, '..', 'IAC.md'),
      XDG_CONFIG_HOME: join(stateDir, 'xdg'),
    },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'bench', version: '0' });
  await client.connect(transport); // spawn + initialize
  const t1 = performance.now();
  await client.callTool({ name: 'list', arguments: { recent: options.recent ?? 5 } }); // needs the history
  const t2 = performance.now();
  const rss = rssMiB(transport.pid);
  await client.close();
  return { init: t1 - t0, firstList: t2 - t1, rss };
}

console.log('building the stores (10 and 10,000 runs)...');
const small = project(10);
const large = project(10_000);
const indexBytes = statSync(join(large.state, 'index.jsonl')).size;

// Loading the history (what a server does once, after the MCP handshake).
const loads = [];
for (let i = 0; i < 5; i++) {
  const t0 = performance.now();
  const { store } = open(large);
  store.refresh();
  loads.push(performance.now() - t0);
}

const a = open(small);
const b = open(large);
a.store.refresh();
b.store.refresh();
// Warm-up: the first write renders every entry shown (200 record files read); later ones only the new one.
await recordOne(a);
await recordOne(b);
const rows = { small: [], large: [] };
for (let i = 0; i < RUNS; i++) {
  rows.small.push(await recordOne(a));
  rows.large.push(await recordOne(b));
}
const med = (list, key) => median(list.map((r) => r[key]));
const iacBytes = statSync(large.iac).size;

const inits = { empty: [], large: [] };
const emptyProject = project(0);
for (let i = 0; i < 5; i++) {
  inits.empty.push(await initializeMs(emptyProject.state));
  inits.large.push(await initializeMs(large.state));
}

const ratio = med(rows.large, 'total') / med(rows.small, 'total');
report('store', [
  {
    figure: 'record one finished job, store part (median ms), 10 runs',
    value: +med(rows.small, 'store').toFixed(3),
    target: '',
  },
  {
    figure: 'record one finished job, store part (median ms), 10,000 runs',
    value: +med(rows.large, 'store').toFixed(3),
    target: '',
  },
  {
    figure: 'the IAC.md write that shows it (median ms), 10 runs',
    value: +med(rows.small, 'iac').toFixed(3),
    target: '',
  },
  {
    figure: 'the IAC.md write that shows it (median ms), 10,000 runs',
    value: +med(rows.large, 'iac').toFixed(3),
    target: '',
  },
  { figure: 'total (median ms), 10 runs', value: +med(rows.small, 'total').toFixed(3), target: '' },
  { figure: 'total (median ms), 10,000 runs', value: +med(rows.large, 'total').toFixed(3), target: '' },
  { figure: 'ratio 10,000 / 10', value: +ratio.toFixed(2), target: '< 2' },
  { figure: `IAC.md bytes at 10,000 runs (N = ${ENTRIES})`, value: iacBytes, target: 'bounded by N' },
  { figure: 'index.jsonl bytes at 10,000 runs', value: indexBytes, target: '' },
  { figure: 'load the 10,000-run history (median ms)', value: +median(loads).toFixed(1), target: 'after initialize' },
  {
    figure: 'spawn + initialize, empty store (median ms)',
    value: +median(inits.empty.map((r) => r.init)).toFixed(1),
    target: '',
  },
  {
    figure: 'spawn + initialize, 10,000 runs (median ms)',
    value: +median(inits.large.map((r) => r.init)).toFixed(1),
    target: '≤ empty + 30',
  },
  {
    figure: 'first list after initialize, 10,000 runs (median ms)',
    value: +median(inits.large.map((r) => r.firstList)).toFixed(1),
    target: '',
  },
]);
console.log(`runs: ${RUNS} each, interleaved; verdict: ratio ${ratio < 2 ? 'meets' : 'MISSES'} the < 2x target`);
for (const p of [small, large, emptyProject]) rmSync(p.dir, { recursive: true, force: true });

// 10,000 against 100,000 runs, each index compacted once (what the first server on a project
// written by an older polyspawn does, under the lock, in the background): then as every later
// server finds it. A server holds the newest 1,000 finished runs (iac/runtime.ts).
console.log('building the 10,000- and 100,000-run stores...');
const stores = { '10,000': project(10_000, 1_000), '100,000': project(100_000, 1_000) };
const sizes = {};
const compactMs = {};
for (const [name, p] of Object.entries(stores)) {
  const before = statSync(join(p.state, 'index.jsonl')).size;
  const t0 = performance.now();
  open(p).store.compact(true);
  compactMs[name] = performance.now() - t0;
  const bytes = (file) => statSync(join(p.state, file)).size;
  sizes[name] = `${before} → ${bytes('index.jsonl')} + base ${bytes('index.base.jsonl')}`;
}
const KEEP = 1000;
const scale = { '10,000': { loads: [], starts: [] }, '100,000': { loads: [], starts: [] } };
// Loads alone first (a few ms each: 30 samples, interleaved), then the servers.
for (let i = 0; i < 30; i++) {
  for (const [name, p] of Object.entries(stores)) {
    const t0 = performance.now();
    open(p, KEEP).store.refresh();
    scale[name].loads.push(performance.now() - t0);
  }
}
for (let i = 0; i < 5; i++) {
  for (const [name, p] of Object.entries(stores))
    scale[name].starts.push(await initializeMs(p.state, { recent: 1000 }));
}
const at = (name, key) => median(scale[name].starts.map((r) => r[key]));
const load = (name) => median(scale[name].loads);
const ratios = {
  load: load('100,000') / load('10,000'),
  init: at('100,000', 'init') / at('10,000', 'init'),
  list: at('100,000', 'firstList') / at('10,000', 'firstList'),
  rss: at('100,000', 'rss') / at('10,000', 'rss'),
};
report('store-scale', [
  ...['10,000', '100,000'].flatMap((name) => [
    {
      figure: `index.jsonl bytes at ${name} runs, before → after the first compaction`,
      value: sizes[name],
      target: '',
    },
    {
      figure: `that compaction (ms), ${name} runs`,
      value: +compactMs[name].toFixed(1),
      target: 'once, in the background',
    },
    {
      figure: `load the history as a server holds it (median ms), ${name} runs`,
      value: +load(name).toFixed(2),
      target: '',
    },
    { figure: `spawn + initialize (median ms), ${name} runs`, value: +at(name, 'init').toFixed(1), target: '' },
    {
      figure: `first list, recent 1000 (median ms), ${name} runs`,
      value: +at(name, 'firstList').toFixed(1),
      target: '',
    },
    { figure: `server RSS after it (median MiB), ${name} runs`, value: +at(name, 'rss').toFixed(1), target: '' },
  ]),
  { figure: 'ratio 100,000 / 10,000: load', value: +ratios.load.toFixed(2), target: '≤ 1.2' },
  { figure: 'ratio 100,000 / 10,000: spawn + initialize', value: +ratios.init.toFixed(2), target: '≤ 1.2' },
  { figure: 'ratio 100,000 / 10,000: first list', value: +ratios.list.toFixed(2), target: '≤ 1.2' },
  { figure: 'ratio 100,000 / 10,000: server RSS', value: +ratios.rss.toFixed(2), target: '≤ 1.2' },
]);
const missed = Object.entries(ratios).filter(([, r]) => r > 1.2);
console.log(
  `loads: 30 each, servers: 5 each, interleaved; verdict: ${missed.length ? `MISSES the 1.2x target on ${missed.map(([k]) => k).join(', ')}` : 'meets the 1.2x target on load, start, list and RSS'}`,
);
for (const p of Object.values(stores)) rmSync(p.dir, { recursive: true, force: true });
