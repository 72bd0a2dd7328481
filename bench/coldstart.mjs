// Cold start and context cost (issues 7, 19 and 25). Cold start: spawn the built server,
// `initialize`, `tools/list`, through the SDK's Client over stdio (which compiles a validator for
// every output schema listed: a validated tools/list), against the floor `node -e 0` (spawn to
// exit) and the peer mcp-server-subagent (bench/install-peer.sh builds it; not on the npm
// registry), interleaved so all see the same machine. Context cost: what a model's client
// sends it (src/mcp/tool-list.ts, modelVisibleBytes): each tool's name, description and
// inputSchema as JSON, at most 450 B a tool on average, and the server's instructions, at most
// 2,500 B; the whole tools/list answer (titles, output schemas and hints too, which stay with the
// client) for information.
//
// Two ways to start, each a row:
// - through the V8 code cache (src/boot.ts) that the first start writes (the warm-up run below):
//   what a client starts; targets: at most 1.5x the floor, and at most the peer's;
// - without it (POLYSPAWN_CODE_CACHE=0), for information.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { figure, median, report, serverEntry } from './lib.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
/** The peer's entry: POLYSPAWN_BENCH_PEER, or where bench/install-peer.sh builds it. */
const peerEntry =
  process.env.POLYSPAWN_BENCH_PEER ??
  join(
    process.env.POLYSPAWN_BENCH_PEER_DIR ?? join(homedir(), '.cache', 'polyspawn', 'peer'),
    'mcp-server-subagent',
    'build',
    'index.js',
  );
const peer = existsSync(peerEntry) ? peerEntry : undefined;
if (!peer)
  console.log(`no peer at ${peerEntry}: run bench/install-peer.sh <checkout of mcp-server-subagent> to measure it too`);

function nodeFloor() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => resolve(performance.now() - t0));
  });
}

/** One start: node and the server's entry (cli.js), then initialize and tools/list, its output schemas compiled. */
async function coldStart(dir, env = {}, entry = serverEntry) {
  const t0 = performance.now();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [entry],
    cwd: dir,
    env: { ...process.env, XDG_CONFIG_HOME: join(dir, 'xdg'), ...env },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'polyspawn-bench', version: '0' });
  await client.connect(transport); // spawn + initialize
  const { tools } = await client.listTools();
  const ms = performance.now() - t0;
  const instructions = client.getInstructions() ?? '';
  await client.close();
  return { ms, tools, instructions };
}

const dir = mkdtempSync(join(tmpdir(), 'polyspawn-bench-cold-'));
await nodeFloor();
await coldStart(dir); // warm-up: the OS file cache, and the code cache written
// The peer keeps its logs under the home folder: a scratch one.
const peerStart = () => coldStart(dir, { HOME: join(dir, 'peer-home') }, peer);
if (peer) await peerStart();
const floor = [];
const served = [];
const uncached = [];
const peers = [];
let tools = [];
let instructions = '';
for (let i = 0; i < RUNS; i++) {
  floor.push(await nodeFloor());
  const run = await coldStart(dir);
  served.push(run.ms);
  ({ tools, instructions } = run);
  uncached.push((await coldStart(dir, { POLYSPAWN_CODE_CACHE: '0' })).ms);
  if (peer) peers.push((await peerStart()).ms);
}
rmSync(dir, { recursive: true, force: true });

const floorMs = median(floor);
const coldMs = median(served);
// The answer as it travels: the JSON-RPC result of tools/list, UTF-8 bytes; and the model's part of it.
const answerBytes = Buffer.byteLength(JSON.stringify({ tools }));
const modelBytes = (t) =>
  Buffer.byteLength(JSON.stringify({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
const perTool = tools.reduce((sum, t) => sum + modelBytes(t), 0) / tools.length;
const instructionsBytes = Buffer.byteLength(instructions);
const rows = [
  figure('cold start through the code cache: spawn → initialize → tools/list (median)', coldMs, 'ms', {
    floor: floorMs,
    ratio: coldMs / floorMs,
    target: '≤ 1.5x floor (node -e 0)',
    met: coldMs <= 1.5 * floorMs,
  }),
  ...(peer
    ? [
        figure('peer mcp-server-subagent: spawn → initialize → tools/list (median)', median(peers), 'ms', {
          floor: floorMs,
          ratio: median(peers) / floorMs,
          target: 'for information',
        }),
        figure('cold start through the code cache, against the peer (median)', coldMs, 'ms', {
          floor: median(peers),
          ratio: coldMs / median(peers),
          target: "≤ the peer's (same run)",
          met: coldMs <= median(peers),
        }),
      ]
    : []),
  figure('cold start without the code cache (median)', median(uncached), 'ms', {
    floor: floorMs,
    ratio: median(uncached) / floorMs,
    target: 'for information',
  }),
  figure('context cost: name, description, inputSchema per tool', perTool, 'B', {
    target: '≤ 450 B per tool',
    met: perTool <= 450,
  }),
  figure('context cost: server instructions', instructionsBytes, 'B', {
    target: '≤ 2,500 B',
    met: instructionsBytes <= 2500,
  }),
  figure("tools/list answer per tool (the client's, for information)", answerBytes / tools.length, 'B', {
    target: 'for information',
  }),
];
report('coldstart', rows);
console.log(`runs: ${RUNS} each, interleaved. tools/list: ${tools.length} tools, ${answerBytes} B in all`);
console.table(
  tools.map((t) => ({
    tool: t.name,
    model: modelBytes(t),
    listed: Buffer.byteLength(JSON.stringify(t)),
    description: Buffer.byteLength(t.description ?? ''),
    inputSchema: Buffer.byteLength(JSON.stringify(t.inputSchema ?? {})),
    outputSchema: Buffer.byteLength(JSON.stringify(t.outputSchema ?? {})),
  })),
);
