// The run store's or IAC.md's folder cannot be written: read-only (EROFS), or on a full disk
// (ENOSPC). Each is a real file system: a small tmpfs, mounted read-only, or filled up. The
// server says so at start (stderr and its instructions), every job still finishes with its
// answer, `result`, `list` and `logs` still answer, and nothing crashes.
//
// Mounting takes root; as root the tmpfs is mounted here and unmounted after. Otherwise the
// server runs in its own user and mount namespace (`unshare -Urm`), where it may mount one; the
// test skips (saying why) only where neither is allowed.
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { waitFor } from '../helpers/processes.js';
import { startRpcServer, stopAllAndCollectStdoutProblems, type RpcServer } from '../helpers/rpc.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string; text?: string; log?: string };
type Kind = 'read-only' | 'full';

const isRoot = process.getuid?.() === 0;
const sh = (cmd: string, args: string[]) => spawnSync(cmd, args, { encoding: 'utf8' });
const probe = tempDir('mount-probe');
const canMountHere =
  isRoot &&
  sh('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe]).status === 0 &&
  sh('umount', [probe]).status === 0;
const canUnshare =
  !canMountHere && sh('unshare', ['-Urm', 'sh', '-c', `mount -t tmpfs -o size=64k tmpfs ${probe}`]).status === 0;
const how = canMountHere ? 'mount' : canUnshare ? 'unshare' : undefined;

const mounted: string[] = [];
afterAll(async () => {
  const problems = await stopAllAndCollectStdoutProblems();
  for (const dir of mounted) sh('umount', ['-l', dir]);
  expect(problems).toEqual([]);
});

const OPTIONS: Record<Kind, string> = { 'read-only': 'ro,size=256k', full: 'size=256k' };

/** Fills a file system until a write fails with ENOSPC. */
function fill(dir: string): void {
  const fd = openSync(join(dir, 'filler'), 'w');
  const block = Buffer.alloc(4096, 1);
  try {
    for (;;) writeSync(fd, block);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
}

/** A server whose folder `dir` is a tmpfs of the given kind, with `env` pointing into it. */
async function serverOn(kind: Kind, envIn: (dir: string) => Record<string, string>): Promise<RpcServer> {
  const dir = tempDir(kind);
  // The server's OS temp folder, where it puts a run's files when the store cannot take them: removed with the test's folders.
  const env = (d: string) => ({ TMPDIR: tempDir(`${kind}-os-temp`), ...envIn(d) });
  if (how === 'mount') {
    expect(sh('mount', ['-t', 'tmpfs', '-o', OPTIONS[kind], 'tmpfs', dir]).status).toBe(0);
    mounted.push(dir);
    if (kind === 'full') fill(dir);
    return startRpcServer({ env: env(dir) });
  }
  // In a namespace of its own: mount, fill, then become the server.
  const script = `mount -t tmpfs -o "$1" tmpfs "$2" && { [ "$3" != full ] || dd if=/dev/zero of="$2/filler" bs=4096 2>/dev/null; true; } && shift 3 && exec "$@"`;
  return startRpcServer({
    env: env(dir),
    wrap: (argv) => ['unshare', '-Urm', 'sh', '-c', script, 'sh', OPTIONS[kind], dir, kind, ...argv],
  });
}

async function runJobs(server: RpcServer): Promise<Job[]> {
  const jobs = await Promise.all([
    server.callOk<Job>('spawn_claude', { prompt: 'answer one' }),
    server.callOk<Job>('spawn_codex', { prompt: 'answer two' }),
    server.callOk<Job>('spawn_copilot', { prompt: 'answer three' }),
    // 2 MB of output: a log that fails part-way, the answer still read from memory.
    server.callOk<Job>('spawn_codex', { prompt: 'answer four [[cli:flood:2]]' }),
  ]);
  const waited = await server.callOk<{ finished: Job[]; pending: Job[] }>('wait_for_agents', {
    agent_ids: jobs.map((j) => j.agent_id),
    timeout_s: 50,
  });
  expect(waited.pending).toEqual([]);
  return jobs;
}

async function expectAnswers(server: RpcServer, jobs: Job[]): Promise<void> {
  const texts = [
    'FAKE claude: answer one',
    'FAKE codex: answer two',
    'FAKE copilot: answer three',
    'FAKE codex: answer four [[cli:flood:2]]',
  ];
  for (const [i, job] of jobs.entries()) {
    const result = await server.callOk<Job>('result', { agent_id: job.agent_id });
    expect(result, job.agent_id).toMatchObject({ state: 'succeeded', text: texts[i] });
    // The logs tool answers (with what it has: here, nothing on disk) rather than failing.
    const page = await server.call('logs', { agent_id: job.agent_id });
    expect(page.isError, JSON.stringify(page)).toBeFalsy();
  }
  const listed = await server.callOk<{ agents: Job[]; running: number }>('list');
  expect(listed.running).toBe(0);
  expect(listed.agents.map((a) => a.agent_id).sort()).toEqual(jobs.map((j) => j.agent_id).sort());
}

/** Waits for a line on the server's stderr (a store or IAC.md write that failed is reported there). */
const waitForStderr = (server: RpcServer, line: RegExp) =>
  waitFor(`stderr to say ${line}`, () => line.test(server.stderr()), 20_000).catch((error: Error) => {
    throw new Error(`${error.message}; stderr:\n${server.stderr()}`);
  });

const instructions = (server: RpcServer) => String(server.initialized?.instructions ?? '');

describe.skipIf(!how)(
  `the store or IAC.md folder cannot be written (tmpfs via ${how ?? 'nothing: neither root nor user namespaces here'})`,
  () => {
    for (const [kind, cause] of [
      ['read-only', /cannot be written \(EROFS\)/],
      ['full', /is full \(\d+ bytes free\)/],
    ] as const) {
      test(
        `${kind}: said at start; every job finishes with its answer; result, list and logs answer; no crash`,
        { timeout: 90_000 },
        async () => {
          const server = await serverOn(kind, (dir) => ({
            POLYSPAWN_STATE_DIR: join(dir, 'state'),
            POLYSPAWN_IAC_FILE: join(dir, 'IAC.md'),
            POLYSPAWN_CONCURRENCY: '4',
          }));
          expect(server.stderr()).toMatch(
            new RegExp(`The run store \\(.*state\\) cannot be written: .*${cause.source}.*Agents still run`),
          );
          expect(server.stderr()).toMatch(new RegExp(`IAC.md \\(.*IAC.md\\) cannot be written: .*${cause.source}`));
          expect(instructions(server)).toMatch(/WARNING: The run store .* cannot be written/);
          const jobs = await runJobs(server);
          await expectAnswers(server, jobs);
          // On the job: each failed write is reported on stderr, not thrown; IAC.md's after its
          // coalescing delay. (On a read-only file system Node's recursive mkdir reports ENOENT,
          // not EROFS.)
          await waitForStderr(
            server,
            kind === 'full' ? /could not record job \w+ in .*ENOSPC/ : /could not record job \w+ in .*(EROFS|ENOENT)/,
          );
          await waitForStderr(
            server,
            kind === 'full' ? /could not write .*IAC\.md: .*ENOSPC/ : /could not write .*IAC\.md: .*(EROFS|ENOENT)/,
          );
          expect(server.stderr().match(/could not record job/g)!.length).toBeLessThanOrEqual(2); // once per cause, not per job
          // Still serving, then a clean exit.
          expect((await server.callOk<Job>('spawn_claude', { prompt: 'and again', wait_s: 30 })).state).toBe(
            'succeeded',
          );
          expect(await server.disconnect()).toBe(0);
        },
      );
    }

    test(
      "only IAC.md's folder is full: the store keeps every job (a new server answers for them)",
      { timeout: 90_000 },
      async () => {
        const projectDir = tempDir('iac-full');
        const server = await serverOn('full', (dir) => ({
          POLYSPAWN_PROJECT_DIR: projectDir,
          POLYSPAWN_IAC_FILE: join(dir, 'IAC.md'),
          POLYSPAWN_CONCURRENCY: '4',
        }));
        expect(server.stderr()).toMatch(/IAC.md \(.*\) cannot be written: the disk holding .* is full/);
        expect(server.stderr()).not.toMatch(/The run store/);
        const jobs = await runJobs(server);
        await expectAnswers(server, jobs);
        await waitForStderr(server, /could not write .*IAC\.md: .*ENOSPC/);
        expect(server.stderr()).not.toMatch(/could not record/);
        expect(await server.disconnect()).toBe(0);

        const next = await startRpcServer({ env: { POLYSPAWN_PROJECT_DIR: projectDir } });
        await expectAnswers(next, jobs);
      },
    );
  },
);

// Where a folder on the way exists but says ENOENT for any child (procfs; also a stale mount),
// Node's recursive mkdir never returns: a core at 100%, the event loop stuck. The server must
// neither hang nor spin, at start or on a job.
test.skipIf(process.platform !== 'linux')(
  'the store and IAC.md are set under /proc: said at start; every job finishes; no hang',
  { timeout: 90_000 },
  async () => {
    const dir = `/proc/polyspawn-test-${process.pid}`;
    const server = await startRpcServer({
      env: {
        POLYSPAWN_STATE_DIR: join(dir, 'state'),
        POLYSPAWN_IAC_FILE: join(dir, 'IAC.md'),
        POLYSPAWN_CONCURRENCY: '4',
        // Where the runs' files go instead: removed with the test's folders.
        TMPDIR: tempDir('proc-os-temp'),
      },
    });
    expect(server.stderr()).toMatch(/The run store \(\/proc\/.*state\) cannot be written/);
    const jobs = await runJobs(server);
    await expectAnswers(server, jobs);
    expect((await server.callOk<Job>('spawn_claude', { prompt: 'and again', wait_s: 30 })).state).toBe('succeeded');
    expect(await server.disconnect()).toBe(0);
  },
);
