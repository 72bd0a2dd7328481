// Cold start and context cost (issues 7, 19 and 25). Cold start: spawn the built server,
// `initialize`, `tools/list`, through the SDK's Client over stdio (which compiles a validator for
// every output schema listed: a validated tools/list), against the floor `node -e 0` (spawn to
// exit) and the peer mcp-server-subagent (bench/install-peer.sh builds it; not on the npm
// registry), interleaved so all see the same machine. Context cost: what a model's client
// sends it (src/mcp/tool-list.ts, modelVisibleBytes): each tool's name, description and
// inputSchema as JSON, at most 450 B a tool on average and 560 B a backend's spawn tool (the
// budgets of test/unit/tool-list.test.ts), and the server's instructions, at most
// 2,500 B; the whole tools/list answer (titles, output schemas and hints too, which stay with the
// client) for information.
//
// Two ways to start, each a row:
// - through the V8 code cache (src/boot.ts) that the first start writes (the warm-up run below):
//   what a client starts; targets: at most 1.5x the floor, and at most the peer's;
// - without it (POLYSPAWN_CODE_CACHE=0), for information.
// And what of a start is the MCP SDK's own (issue 25): a server that is @modelcontextprotocol/server
// and nothing else, bundled and started through a code cache as polyspawn is, answering
// polyspawn's initialize and tools/list from a file: with the output schemas, and without them
// (what the client's validator compiles), interleaved with the rest.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { build } from 'esbuild';
import { figure, median, report, root, serverEntry } from './lib.mjs';

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

/**
 * The SDK alone, in `dir`: its bundle, run by a boot that keeps a V8 code cache beside it (as
 * src/boot.ts does), serving `answer` (instructions and tools/list) from answer.json.
 */
async function sdkAloneServer(dir, answer) {
  writeFileSync(join(dir, 'answer.json'), JSON.stringify(answer));
  const source = `
    const { McpServer } = require('@modelcontextprotocol/server');
    const { serveStdio } = require('@modelcontextprotocol/server/stdio');
    const answer = JSON.parse(require('node:fs').readFileSync(__dirname + '/answer.json', 'utf8'));
    void serveStdio(() => {
      const server = new McpServer({ name: 'sdk-alone', version: '0' }, {
        instructions: answer.instructions,
        capabilities: { tools: { listChanged: true } },
        // as polyspawn (src/mcp/lazy-validator.ts): no validator built that is never used
        jsonSchemaValidator: { getValidator: () => { throw new Error('unused'); } },
      });
      server.server.setRequestHandler('tools/list', () => ({ tools: answer.tools }));
      return server;
    });`;
  await build({
    stdin: { contents: source, resolveDir: root, loader: 'js' },
    outfile: join(dir, 'sdk.cjs'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    mainFields: ['module', 'main'],
    minifyWhitespace: true,
    minifySyntax: true,
    ignoreAnnotations: true,
    logLevel: 'warning',
  });
  const boot = join(dir, 'boot.cjs');
  writeFileSync(
    boot,
    `const fs = require('node:fs'), vm = require('node:vm');
const file = __dirname + '/sdk.cjs', cache = file + '.v8cache';
let cachedData; try { cachedData = fs.readFileSync(cache); } catch {}
const script = new vm.Script('(function (require, __dirname) {' + fs.readFileSync(file, 'utf8') + '\\n})', { filename: file, cachedData });
script.runInThisContext()(require, __dirname);
if (!cachedData || script.cachedDataRejected) setTimeout(() => fs.writeFileSync(cache, script.createCachedData()), 1000).unref();
`,
  );
  return boot;
}

const dir = mkdtempSync(join(tmpdir(), 'polyspawn-bench-cold-'));
await nodeFloor();
const first = await coldStart(dir); // warm-up: the OS file cache, and the code cache written
const withoutOutputs = first.tools.map(({ outputSchema: _, ...tool }) => tool);
const sdkAlone = [
  await sdkAloneServer(mkdtempSync(join(dir, 'sdk-')), { instructions: first.instructions, tools: first.tools }),
  await sdkAloneServer(mkdtempSync(join(dir, 'sdk-')), { instructions: first.instructions, tools: withoutOutputs }),
];
for (const boot of sdkAlone) for (let i = 0; i < 2; i++) await coldStart(dir, {}, boot); // its cache written, then used
// The peer keeps its logs under the home folder: a scratch one.
const peerStart = () => coldStart(dir, { HOME: join(dir, 'peer-home') }, peer);
if (peer) await peerStart();
const floor = [];
const served = [];
const uncached = [];
const peers = [];
const sdkAloneRuns = sdkAlone.map(() => []);
let tools = [];
let instructions = '';
for (let i = 0; i < RUNS; i++) {
  floor.push(await nodeFloor());
  const run = await coldStart(dir);
  served.push(run.ms);
  ({ tools, instructions } = run);
  uncached.push((await coldStart(dir, { POLYSPAWN_CODE_CACHE: '0' })).ms);
  if (peer) peers.push((await peerStart()).ms);
  for (const [k, boot] of sdkAlone.entries()) sdkAloneRuns[k].push((await coldStart(dir, {}, boot)).ms);
}
rmSync(dir, { recursive: true, force: true });

const floorMs = median(floor);
const coldMs = median(served);
// The answer as it travels: the JSON-RPC result of tools/list, UTF-8 bytes; and the model's part of it.
const answerBytes = Buffer.byteLength(JSON.stringify({ tools }));
const modelBytes = (t) =>
  Buffer.byteLength(JSON.stringify({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
// The budgets of test/unit/tool-list.test.ts: a backend's spawn tool is held to a bound of its own.
const isSpawn = (t) => t.name.startsWith('spawn_');
const others = tools.filter((t) => !isSpawn(t));
const perTool = others.reduce((sum, t) => sum + modelBytes(t), 0) / others.length;
const largestSpawn = Math.max(...tools.filter(isSpawn).map(modelBytes));
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
  figure("the MCP SDK alone, serving polyspawn's initialize and tools/list (median)", median(sdkAloneRuns[0]), 'ms', {
    floor: floorMs,
    ratio: median(sdkAloneRuns[0]) / floorMs,
    target: 'for information: what of the start is the SDK and the client',
  }),
  figure('the MCP SDK alone, the same tools/list without output schemas (median)', median(sdkAloneRuns[1]), 'ms', {
    floor: floorMs,
    ratio: median(sdkAloneRuns[1]) / floorMs,
    target: 'for information: less what the client compiles',
  }),
  figure('cold start without the code cache (median)', median(uncached), 'ms', {
    floor: floorMs,
    ratio: median(uncached) / floorMs,
    target: 'for information',
  }),
  figure('context cost: name, description, inputSchema per tool but the spawn tools', perTool, 'B', {
    target: '≤ 450 B per tool',
    met: perTool <= 450,
  }),
  figure('context cost: the largest spawn tool', largestSpawn, 'B', {
    target: '≤ 560 B',
    met: largestSpawn <= 560,
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
