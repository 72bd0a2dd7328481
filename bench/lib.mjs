// Shared by the benchmarks: the built server over stdio with the SDK client, and statistics.
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

export const root = fileURLToPath(new URL('..', import.meta.url));
export const fakeBin = join(root, 'test', 'fakes', 'bin');
export const serverEntry = join(root, 'dist', 'src', 'cli.js');
/** An instant fake codex: one /bin/sh, no node (test/fakes/instant/codex). */
export const instantCodex = join(root, 'test', 'fakes', 'instant', 'codex');

export async function startServer(env = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-bench-'));
  const transport = new StdioClientTransport({
    command: process.execPath,
    // BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' profiles the server under load.
    args: [...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []), serverEntry],
    cwd: dir,
    env: {
      ...process.env,
      PATH: `${fakeBin}${delimiter}${process.env.PATH}`,
      XDG_CONFIG_HOME: join(dir, 'xdg'),
      ...env,
    },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'polyspawn-bench', version: '0' });
  await client.connect(transport);
  const call = async (name, args) => {
    const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 600_000 });
    if (result.isError) throw new Error(`${name}: ${result.content[0].text}`);
    return result.structuredContent;
  };
  return { client, transport, call, dir, pid: transport.pid, close: () => client.close() };
}

/** The n-th job id starting with `first`, in the job table's alphabet (the store reads back no other id). */
export function jobId(first, n) {
  const alphabet = 'abcdefghijkmnpqrstuvwxyz23456789';
  let id = '';
  for (let rest = n, i = 0; i < 5; i++, rest = Math.floor(rest / 32)) id = alphabet[rest % 32] + id;
  return first + id;
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The nearest-rank percentile: the smallest value that p% of the values are at or below. */
export const percentile = (xs, p) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)];

/** Peak resident set of a process so far (Linux), in MiB. */
export const peakRssMiB = (pid) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
export const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

/**
 * One figure of issue 7's table: its value, the floor it is measured against in the same run
 * (if any), the target, and whether the target is met. `met` is computed by the caller.
 */
export const figure = (name, value, unit, { floor, ratio, target = '', met } = {}) => ({
  figure: name,
  value: typeof value === 'number' ? +value.toFixed(value < 10 ? 3 : 1) : value,
  unit,
  ...(floor !== undefined ? { floor: typeof floor === 'number' ? +floor.toFixed(floor < 10 ? 3 : 1) : floor } : {}),
  ...(ratio !== undefined ? { ratio: +ratio.toFixed(2) } : {}),
  target,
  ...(met !== undefined ? { met: met ? 'yes' : 'NO' } : {}),
});

/** Prints rows as a table and appends them to bench/results/<name>.json. */
export function report(name, rows) {
  console.log(`\n${name}`);
  console.table(rows);
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  writeFileSync(
    join(root, 'bench', 'results', `${name}.json`),
    JSON.stringify({ when: new Date().toISOString(), node: process.version, rows }, null, 2),
  );
}
