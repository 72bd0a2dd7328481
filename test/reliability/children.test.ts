// Children that misbehave, each through the whole server (test/fakes/odd-cli.mjs plays codex):
// one that closes its stdout but keeps running, ones that fork and exit, one whose output is
// not UTF-8. Each ends in the state that says what happened, and no process of it is left.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseIac } from '../helpers/iac.js';
import { repoRoot } from '../helpers/mcp.js';
import { isGone, waitFor } from '../helpers/processes.js';
import { startRpcServer, stopAllAndCollectStdoutProblems, type RpcServer } from '../helpers/rpc.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string; text?: string; error?: string; log?: string; output_tail?: string };

const dir = tempDir('children');
let server: RpcServer;
beforeAll(async () => {
  server = await startRpcServer({
    env: { POLYSPAWN_CONCURRENCY: '8', POLYSPAWN_CODEX_BIN: join(repoRoot, 'test', 'fakes', 'odd-cli.mjs') },
  });
});
afterAll(async () => {
  expect(await stopAllAndCollectStdoutProblems()).toEqual([]);
});

let n = 0;
/** The pids an odd CLI run reports: itself, and the child it forked (if any). */
async function pidsOf(file: string): Promise<number[]> {
  await waitFor(`the CLI to write ${file}`, () => existsSync(file) && readFileSync(file, 'utf8').length > 0);
  return readFileSync(file, 'utf8').split(' ').map(Number);
}
const spawnOdd = async (directives: string, args: Record<string, unknown> = {}) => {
  const file = join(dir, `pids-${++n}`);
  const job = await server.callOk<Job>('spawn_codex', {
    prompt: `odd ${n} [[odd:pids:${file}]] ${directives}`,
    ...args,
  });
  return { job, file };
};
const waitDone = async (id: string, timeout_s = 30) => {
  const waited = await server.callOk<{ finished: Job[] }>('wait_for_agents', { agent_ids: [id], timeout_s });
  expect(waited.finished, `${id} finished`).toHaveLength(1);
  return waited.finished[0]!;
};
const allGone = (pids: number[]) =>
  waitFor(`processes ${pids.join(', ')} to be gone`, () => pids.every(isGone), 10_000);

describe('a child that closes its stdout', () => {
  test('and keeps running: it stays running (its answer already read) until its timeout ends it', async () => {
    const { job, file } = await spawnOdd('[[odd:close-stdout]]', { timeout_s: 3 });
    const [pid] = await pidsOf(file);
    await new Promise((r) => setTimeout(r, 1000));
    const meanwhile = await server.callOk<Job>('result', { agent_id: job.agent_id });
    expect(meanwhile.state).toBe('running');
    expect(isGone(pid!)).toBe(false);
    const done = await waitDone(job.agent_id);
    expect(done.state).toBe('timed_out');
    expect(done.error).toMatch(/timed out after 3 s and was stopped/);
    expect(done.text).toMatch(/^ODD: odd \d+/); // what it printed before closing stdout is kept
    await allGone([pid!]);
  });

  test('and exits a second later: succeeded, with the answer it printed', async () => {
    const { job, file } = await spawnOdd('[[odd:close-stdout]] [[odd:then-exit:1000]]');
    const [pid] = await pidsOf(file);
    const done = await waitDone(job.agent_id);
    expect(done).toMatchObject({ state: 'succeeded', text: expect.stringMatching(/^ODD: odd \d+/) });
    await allGone([pid!]);
  });

  test('before printing anything, then exits: failed, saying the output had no result', async () => {
    const { job, file } = await spawnOdd('[[odd:close-stdout-first]] [[odd:then-exit:500]]');
    const [pid] = await pidsOf(file);
    const done = await waitDone(job.agent_id);
    expect(done.state).toBe('failed');
    expect(done.error).toMatch(
      /codex exited with code 0 without a turn\.completed event: its output is malformed or truncated/,
    );
    await allGone([pid!]);
  });
});

describe('a child that forks and exits', () => {
  test('the fork detached from its pipes: succeeded, and the fork is ended with the job', async () => {
    const { job, file } = await spawnOdd('[[odd:fork-and-exit]]');
    const pids = await pidsOf(file);
    expect(pids).toHaveLength(2);
    const done = await waitDone(job.agent_id);
    expect(done).toMatchObject({ state: 'succeeded', text: expect.stringMatching(/^ODD: odd \d+/) });
    await allGone(pids);
  });

  test('the fork holding its stdout and stderr open: succeeded at once, the fork ended', async () => {
    const gc = join(dir, 'gc-keeps-pipes');
    const started = Date.now();
    const job = await server.callOk<Job>('spawn_claude', {
      prompt: `fork [[cli:grandchild:${gc}]] [[cli:exit-leaving-grandchild]] [[cli:grandchild-keeps-pipes]]`,
      wait_s: 30,
    });
    expect(job).toMatchObject({ state: 'succeeded', text: expect.stringContaining('FAKE claude: fork') });
    expect(Date.now() - started).toBeLessThan(20_000); // not held until the fork would have ended
    await allGone([Number(readFileSync(gc, 'utf8'))]);
  });
});

describe('a child whose output is not UTF-8', () => {
  test('succeeded; invalid bytes become U+FFFD in the answer, the log keeps the bytes, IAC.md stays whole', async () => {
    const { job, file } = await spawnOdd('[[odd:not-utf8]]');
    const [pid] = await pidsOf(file);
    const done = await waitDone(job.agent_id);
    expect(done.state).toBe('succeeded');
    expect(done.text).toBe('ODD: caf\uFFFD \uFFFD\uFFFD \uFFFD end');
    const result = await server.callOk<Job>('result', { agent_id: job.agent_id });
    expect(result.text).toBe(done.text);

    // The log file holds exactly the bytes the child wrote; the logs tool pages through it.
    const log = readFileSync(done.log!);
    expect(log.includes(Buffer.from([0xe9, 0x20, 0xff, 0xfe, 0x20, 0xe2, 0x82]))).toBe(true);
    const page = await server.callOk<{ text: string; size: number }>('logs', { agent_id: job.agent_id });
    expect(page.size).toBe(log.length);
    expect(page.text).toContain('"text":"日"'); // a character split across two writes, whole
    expect(page.text).toContain('ODD: caf\uFFFD');
    const stderr = await server.callOk<{ text: string }>('logs', { agent_id: job.agent_id, stream: 'stderr' });
    expect(stderr.text).toBe('warn: \uFFFD(\uFFFD\n');
    await allGone([pid!]);

    const iac = join(server.projectDir, 'IAC.md');
    const entry = () =>
      existsSync(iac) ? parseIac(readFileSync(iac, 'utf8')).entries.find((e) => e.id === job.agent_id) : undefined;
    await waitFor('IAC.md to show it finished', () => entry() !== undefined, 10_000);
    expect(entry()!.result).toBe('ODD: caf\uFFFD \uFFFD\uFFFD \uFFFD end\n');
  });
});
