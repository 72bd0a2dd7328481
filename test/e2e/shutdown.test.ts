// No orphans: however the server ends, every process of every job ends with it.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { once } from 'node:events';
import { afterEach, describe, expect, test } from 'vitest';
import { fakeBinDir, serverEntry } from '../helpers/mcp.js';
import { killMarked, MARK_VARIABLE, markedProcesses } from '../helpers/process-groups.js';
import { waitFor, waitGone } from '../helpers/processes.js';

/** The owner test/setup/end-processes.ts marks this test's processes with: the server and all it starts. */
const thisTest = () => process.env[MARK_VARIABLE]!.slice(`${process.pid}:`.length);

const servers: { server: ChildProcessWithoutNullStreams; dir: string }[] = [];
afterEach(async () => {
  // After a failed test its server may still run, with its jobs: the setup file would end them
  // after this hook, but they must be gone before their folder is.
  killMarked(thisTest());
  for (const { server, dir } of servers.splice(0)) {
    if (server.exitCode === null && server.signalCode === null) await once(server, 'exit');
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  }
});

/** A server started by hand, to end it in ways the SDK client would not. */
async function serverWithRunningJobs(count: number) {
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-shutdown-'));
  const server = spawn(process.execPath, [serverEntry], {
    cwd: dir,
    env: {
      ...process.env,
      PATH: `${fakeBinDir}${delimiter}${process.env.PATH}`,
      FAKE_CLI_RECORD: dir,
      POLYSPAWN_KILL_GRACE_S: '1',
      XDG_CONFIG_HOME: join(dir, 'xdg'),
    },
  }) as ChildProcessWithoutNullStreams;
  servers.push({ server, dir });
  let stdout = '';
  server.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const send = (message: object) => server.stdin.write(`${JSON.stringify(message)}\n`);
  send({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'shutdown-test', version: '1' } },
  });
  send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  const backends = ['claude', 'codex', 'copilot'];
  for (let i = 0; i < count; i++) {
    // One job ignores SIGTERM: the grace period and SIGKILL must still end it.
    const extra = i === 0 ? '[[cli:ignore-term]]' : '[[cli:hang]]';
    // And one started in a session of its own (setsid), out of the job's process group.
    const prompt = `job ${i} ${extra} [[cli:grandchild:${join(dir, `gc-${i}`)}]] [[cli:setsid-grandchild:${join(dir, `sgc-${i}`)}]]`;
    send({
      jsonrpc: '2.0',
      id: i + 1,
      method: 'tools/call',
      params: { name: `spawn_${backends[i % 3]}`, arguments: { prompt } },
    });
  }
  // Every job started: its record and its grandchild's pid file exist.
  await waitFor(
    'all jobs to start',
    () =>
      readdirSync(dir).filter((f) => /^s?gc-\d+$/.test(f)).length === 2 * count &&
      readdirSync(dir).filter((f) => /^\d+\.json$/.test(f)).length === count,
    20_000,
  );
  const pids = readdirSync(dir).flatMap((f) =>
    /^\d+\.json$/.test(f)
      ? [Number(f.slice(0, -5))]
      : /^s?gc-\d+$/.test(f)
        ? [Number(readFileSync(join(dir, f), 'utf8'))]
        : [],
  );
  expect(pids).toHaveLength(3 * count);
  return { server, pids, stdout: () => stdout, dir };
}

/** The jobs' CLIs and grandchildren are gone, and so is everything else this test started (the server, its reaper). */
async function allGone(pids: number[]): Promise<void> {
  await Promise.all(pids.map((pid) => waitGone(pid, 15_000)));
  await waitFor('nothing of this test to be left', () => markedProcesses(thisTest()).length === 0, 15_000);
}

describe('the server ends every job it started', () => {
  test('when its stdin closes (the client went away)', async () => {
    const { server, pids, stdout } = await serverWithRunningJobs(4);
    server.stdin.end();
    const [code] = await once(server, 'exit');
    expect(code).toBe(0);
    await allGone(pids);
    // stdout carried JSON-RPC and nothing else.
    for (const line of stdout().trim().split('\n')) expect(JSON.parse(line)).toHaveProperty('jsonrpc', '2.0');
  });

  test('when it gets SIGTERM', async () => {
    const { server, pids } = await serverWithRunningJobs(3);
    server.kill('SIGTERM');
    await once(server, 'exit');
    await allGone(pids);
  });

  test('when it is killed with SIGKILL, which it cannot catch (the reaper does it)', async () => {
    const { server, pids, dir } = await serverWithRunningJobs(3);
    server.kill('SIGKILL');
    await once(server, 'exit');
    await allGone(pids);
    expect(existsSync(dir)).toBe(true);
  });
});
