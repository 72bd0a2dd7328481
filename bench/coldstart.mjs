// Cold start and context cost (issue 7). Cold start: spawn the built server, `initialize`,
// `tools/list`, through the SDK's Client over stdio, against the floor `node -e 0` (spawn to
// exit), interleaved so both see the same machine; target at most 1.5x the floor. Context
// cost: bytes of the `tools/list` answer (its JSON) per tool; target at most 450 B.
//
// The server starts through a V8 code cache (src/boot.ts) that the first start after an install
// or upgrade writes (the warm-up run below, on a machine that has none yet); a second row gives
// what a start without it costs (POLYSPAWN_CODE_CACHE=0), for information.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { figure, median, report, serverEntry } from './lib.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);

function nodeFloor() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => resolve(performance.now() - t0));
  });
}

async function coldStart(dir, env = {}) {
  const t0 = performance.now();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [serverEntry],
    cwd: dir,
    env: { ...process.env, XDG_CONFIG_HOME: join(dir, 'xdg'), ...env },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'polyspawn-bench', version: '0' });
  await client.connect(transport); // spawn + initialize
  const { tools } = await client.listTools();
  const ms = performance.now() - t0;
  await client.close();
  return { ms, tools };
}

const dir = mkdtempSync(join(tmpdir(), 'polyspawn-bench-cold-'));
await nodeFloor();
await coldStart(dir); // warm-up: the OS file cache, not the server, is what the first run measures
const floor = [];
const served = [];
const uncached = [];
let tools = [];
for (let i = 0; i < RUNS; i++) {
  floor.push(await nodeFloor());
  const run = await coldStart(dir);
  served.push(run.ms);
  tools = run.tools;
  uncached.push((await coldStart(dir, { POLYSPAWN_CODE_CACHE: '0' })).ms);
}
rmSync(dir, { recursive: true, force: true });

const floorMs = median(floor);
const coldMs = median(served);
// The answer as it travels: the JSON-RPC result of tools/list, UTF-8 bytes.
const answerBytes = Buffer.byteLength(JSON.stringify({ tools }));
const perTool = answerBytes / tools.length;
const rows = [
  figure('cold start: spawn → initialize → tools/list (median)', coldMs, 'ms', {
    floor: floorMs,
    ratio: coldMs / floorMs,
    target: '≤ 1.5x floor (node -e 0)',
    met: coldMs <= 1.5 * floorMs,
  }),
  figure('cold start without the code cache (median)', median(uncached), 'ms', {
    floor: floorMs,
    ratio: median(uncached) / floorMs,
    target: 'for information',
  }),
  figure('context cost: tools/list answer per tool', perTool, 'B', { target: '≤ 450 B per tool', met: perTool <= 450 }),
];
report('coldstart', rows);
console.log(`runs: ${RUNS} each, interleaved. tools/list: ${tools.length} tools, ${answerBytes} B in all`);
console.table(
  tools.map((t) => ({
    tool: t.name,
    bytes: Buffer.byteLength(JSON.stringify(t)),
    description: Buffer.byteLength(t.description ?? ''),
    inputSchema: Buffer.byteLength(JSON.stringify(t.inputSchema ?? {})),
    outputSchema: Buffer.byteLength(JSON.stringify(t.outputSchema ?? {})),
  })),
);
