// runProcess against the fake vendor CLIs (test/fakes/): real child processes, real process
// groups, real pipes. No assertion on speed; time bounds only guard against hangs.
import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, open, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runProcess, type RunResult, type RunSpec } from '../../src/jobs/process/runner.js';
import { killMarked, MARK_VARIABLE, markedProcesses } from '../helpers/process-groups.js';
import { groupMembers, isGone, readRecord, ready, waitFor, waitGone } from '../helpers/processes.js';

const BIN = resolve(fileURLToPath(new URL('../fakes/bin', import.meta.url)));
const fake = (name: 'claude' | 'codex' | 'copilot') => join(BIN, name);

const ARGS = {
  claude: ['-p', '--output-format', 'json'],
  codex: ['exec', '--json', '--skip-git-repo-check', '-'],
  copilot: ['--output-format', 'json'],
};

/** The owner test/setup/end-processes.ts marks this test's processes with. */
const thisTest = () => process.env[MARK_VARIABLE]!.slice(`${process.pid}:`.length);

/**
 * What this test started and is still alive: its jobs and whatever they spawned, escaped
 * grandchildren included; not the runner's reaper sidecar, which lives as long as this worker.
 */
const leftOver = () =>
  markedProcesses(thisTest()).filter((pid) => {
    try {
      return !readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('polyspawn-reaper');
    } catch {
      return false; // gone meanwhile
    }
  });

const dirs: string[] = [];
afterEach(async () => {
  // The setup file ends a failed test's processes too, but only after this hook: end them
  // before their folders go, so that nothing writes into a folder being removed.
  killMarked(thisTest());
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true, maxRetries: 3 })));
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'polyspawn-runner-'));
  dirs.push(d);
  return d;
}

type Start = Partial<RunSpec> & { name?: 'claude' | 'codex' | 'copilot' };

/** Starts a fake CLI with `prompt` on stdin; FAKE_CLI_RECORD points at `dir`. */
async function start(prompt: string, opts: Start = {}) {
  const dir = await tempDir();
  const name = opts.name ?? 'claude';
  const spec: RunSpec = {
    file: fake(name),
    args: ARGS[name],
    cwd: dir,
    stdin: prompt,
    stdoutLog: join(dir, 'stdout.log'),
    stderrLog: join(dir, 'stderr.log'),
    timeoutMs: 60_000,
    graceMs: 2_000,
    ...opts,
    env: { FAKE_CLI_RECORD: dir, ...opts.env },
  };
  const proc = runProcess(spec);
  return { proc, dir, spec, record: () => readRecord(dir, proc.pid) };
}

function lastLine(text: string): string {
  return text.trimEnd().split('\n').at(-1) ?? '';
}

function json(line: string): { [k: string]: unknown } {
  return JSON.parse(line) as { [k: string]: unknown };
}

describe('runProcess with the fake CLIs', () => {
  it('runs a successful job: exit 0, JSON on stdout, full output in the log files', async () => {
    const { proc, dir, spec, record } = await start('hello there');
    expect(proc.pid).toBeTypeOf('number');
    const r = await proc.done;
    expect(r).toMatchObject({ end: 'exited', exitCode: 0, exitSignal: null, stdoutTruncated: false, stderr: '' });
    const out = json(r.stdout);
    expect(out).toMatchObject({ type: 'result', is_error: false, result: 'FAKE claude: hello there' });
    expect(await readFile(spec.stdoutLog, 'utf8')).toBe(r.stdout);
    expect(await readFile(spec.stderrLog, 'utf8')).toBe('');
    expect(record()).toMatchObject({ name: 'claude', argv: ARGS.claude, cwd: dir, prompt: 'hello there' });
    expect(isGone(proc.pid!)).toBe(true);
  });

  it('reports a failing CLI: its exit code, its error record, its stderr', async () => {
    const { proc, spec } = await start('do it [[cli:fail]] [[cli:stderr:something broke]]');
    const r = await proc.done;
    expect(r).toMatchObject({ end: 'exited', exitCode: 1, exitSignal: null });
    expect(json(r.stdout)).toMatchObject({ is_error: true, subtype: 'success', api_error_status: 401 });
    expect(r.stderr).toBe('something broke\n');
    expect(await readFile(spec.stderrLog, 'utf8')).toBe('something broke\n');

    const other = await (await start('fine [[cli:exit:7]]', { name: 'codex', args: ARGS.codex })).proc.done;
    expect(other).toMatchObject({ end: 'exited', exitCode: 7 });
    expect(json(lastLine(other.stdout)).type).toBe('turn.completed');
  });

  it('lets a slow job finish, and shows its newest output while it runs', async () => {
    const { proc } = await start('[[cli:stderr:working on it]] [[cli:sleep:800]]');
    await waitFor('progress output', () => proc.tail(100).includes('working on it'));
    const r = await proc.done;
    expect(r).toMatchObject({ end: 'exited', exitCode: 0 });
    expect(json(r.stdout).result).toContain('[[cli:sleep:800]]');
    expect(proc.tail(10_000)).toContain('FAKE claude:'); // stdout, once there is some
  });

  it('ends a hanging job on timeout and the process is gone', async () => {
    const { proc } = await start('[[cli:hang]]', { timeoutMs: 300 });
    const r = await proc.done;
    expect(r).toMatchObject({ end: 'timeout', exitCode: null, exitSignal: 'SIGTERM' });
    await waitGone(proc.pid!);
  });

  it('on time-out ends the whole group: a leader that ignores SIGTERM, and its grandchild', async () => {
    const dir = await tempDir();
    const pidFile = join(dir, 'grandchild.pid');
    // The time-out leaves the CLI time to start its grandchild and install its handler first,
    // even on a busy machine.
    const { proc } = await start(`[[cli:ignore-term]] [[cli:grandchild:${pidFile}]]`, {
      timeoutMs: 8_000,
      graceMs: 500,
    });
    await waitFor('the grandchild', () => existsSync(pidFile));
    const grandchild = Number(readFileSync(pidFile, 'utf8'));
    expect(groupMembers(proc.pid!)).toEqual(expect.arrayContaining([proc.pid, grandchild]));
    const r = await proc.done;
    expect(r).toMatchObject({ end: 'timeout', exitCode: null, exitSignal: 'SIGKILL' });
    await waitGone(proc.pid!);
    await waitGone(grandchild);
    expect(groupMembers(proc.pid!)).toEqual([]);
    await waitFor('nothing of this test to be left', () => leftOver().length === 0);
  }, 30_000);

  it('kills a job that ignores SIGTERM with SIGKILL once the grace period is over', async () => {
    const ac = new AbortController();
    const graceMs = 400;
    const { proc, dir } = await start('[[cli:ignore-term]]', { graceMs, signal: ac.signal });
    await ready(dir, proc.pid); // its SIGTERM handler is installed
    const abortedAt = Date.now();
    ac.abort();
    const r = await proc.done;
    expect(r).toMatchObject({ end: 'cancelled', exitSignal: 'SIGKILL' });
    expect(Date.now() - abortedAt).toBeGreaterThanOrEqual(graceMs); // it did get its grace period
    await waitGone(proc.pid!);
  });

  it('cancels a running job through its AbortSignal', async () => {
    const ac = new AbortController();
    const { proc, dir } = await start('[[cli:hang]]', { signal: ac.signal });
    await ready(dir, proc.pid);
    ac.abort();
    const r = await proc.done;
    expect(r).toMatchObject({ end: 'cancelled', exitSignal: 'SIGTERM' });
    await waitGone(proc.pid!);
  });

  it('cancels a job whose signal was aborted before it started', async () => {
    const { proc } = await start('[[cli:hang]]', { signal: AbortSignal.abort() });
    const r = await proc.done;
    expect(r.end).toBe('cancelled');
    await waitGone(proc.pid!);
  });

  it('ends a grandchild together with its job on cancel', async () => {
    const ac = new AbortController();
    const dir = await tempDir();
    const pidFile = join(dir, 'grandchild.pid');
    // A grace period far above the hang guard: both die on SIGTERM, so the job must not wait
    // it out (even while the dead grandchild is a zombie awaiting init's reaping).
    const { proc } = await start(`[[cli:grandchild:${pidFile}]] [[cli:hang]]`, { signal: ac.signal, graceMs: 60_000 });
    await waitFor('the grandchild', () => existsSync(pidFile));
    const grandchild = Number(readFileSync(pidFile, 'utf8'));
    expect(isGone(grandchild)).toBe(false);
    ac.abort();
    expect((await proc.done).end).toBe('cancelled');
    await waitGone(proc.pid!);
    await waitGone(grandchild);
    expect(groupMembers(proc.pid!)).toEqual([]);
    await waitFor('nothing of this test to be left', () => leftOver().length === 0);
  }, 15_000);

  it('ends what the job started in sessions of their own (setsid), with its mark or only its ancestry, on cancel and on exit', async () => {
    const dir = await tempDir();
    const files = { marked: join(dir, 'marked.pid'), bare: join(dir, 'bare.pid'), left: join(dir, 'left.pid') };
    const pids: number[] = [];
    try {
      // Cancel: one keeps the run's mark in its environment; the other has none, and is found
      // as a descendant of the leader.
      const ac = new AbortController();
      const { proc } = await start(
        `[[cli:setsid-grandchild:${files.marked}]] [[cli:setsid-grandchild-bare:${files.bare}]] [[cli:hang]]`,
        { signal: ac.signal, graceMs: 60_000 },
      );
      await waitFor('the setsid grandchildren', () => existsSync(files.marked) && existsSync(files.bare));
      const [marked, bare] = [files.marked, files.bare].map((f) => Number(readFileSync(f, 'utf8')));
      pids.push(marked!, bare!);
      expect(groupMembers(proc.pid!)).not.toContain(marked);
      expect(isGone(marked!) || isGone(bare!)).toBe(false);
      ac.abort();
      expect((await proc.done).end).toBe('cancelled');
      await waitGone(marked!);
      await waitGone(bare!);
      // Exit: the leader is gone, so only the mark finds what it left.
      const exiting = await start(`[[cli:setsid-grandchild:${files.left}]]`, { graceMs: 60_000 });
      expect(await exiting.proc.done).toMatchObject({ end: 'exited', exitCode: 0 });
      const left = Number(readFileSync(files.left, 'utf8'));
      pids.push(left);
      await waitGone(left);
    } finally {
      // The bare one carries no mark of this test's: ended by pid if the runner missed it.
      for (const pid of pids) if (!isGone(pid)) process.kill(pid, 'SIGKILL');
    }
  }, 30_000);

  for (const keepsPipes of [false, true]) {
    it(`ends a grandchild left behind by a leader that exits 0 (${keepsPipes ? 'holding' : 'not holding'} its pipes)`, async () => {
      const dir = await tempDir();
      const pidFile = join(dir, 'grandchild.pid');
      const prompt = `[[cli:grandchild:${pidFile}]] [[cli:exit-leaving-grandchild]]${keepsPipes ? ' [[cli:grandchild-keeps-pipes]]' : ''}`;
      const { proc } = await start(prompt, { name: 'codex', args: ARGS.codex, graceMs: 60_000 });
      const r = await proc.done; // finishes although the grandchild would live for ages
      expect(r).toMatchObject({ end: 'exited', exitCode: 0, exitSignal: null });
      expect(json(lastLine(r.stdout)).type).toBe('turn.completed');
      const grandchild = Number(readFileSync(pidFile, 'utf8'));
      await waitGone(grandchild);
      expect(groupMembers(proc.pid!)).toEqual([]);
      await waitFor('nothing of this test to be left', () => leftOver().length === 0);
    }, 15_000);
  }

  it('streams 200 MB of output to the log while memory holds only a bounded head and tail', async () => {
    const rssBefore = process.memoryUsage().rss;
    let rssMax = rssBefore;
    const sampler = setInterval(() => (rssMax = Math.max(rssMax, process.memoryUsage().rss)), 25);
    let r: RunResult;
    let spec: RunSpec;
    try {
      const started = await start('[[cli:flood:200]]', { name: 'codex', args: ARGS.codex, timeoutMs: 120_000 });
      spec = started.spec;
      r = await started.proc.done;
    } finally {
      clearInterval(sampler);
    }
    rssMax = Math.max(rssMax, process.memoryUsage().rss);

    expect(r).toMatchObject({ end: 'exited', exitCode: 0, stdoutTruncated: true });
    const memBytes = Buffer.byteLength(r.stdout);
    expect(memBytes).toBeGreaterThan(1 << 20);
    expect(memBytes).toBeLessThanOrEqual(4 << 20);
    const lines = r.stdout.trimEnd().split('\n');
    expect(json(lines[0]!).type).toBe('thread.started'); // the head
    expect(json(lines.at(-1)!).type).toBe('turn.completed'); // the final result line
    expect(json(lines.at(-2)!)).toMatchObject({ type: 'item.completed', item: { type: 'agent_message' } });
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow(); // cut at line boundaries

    const size = (await stat(spec.stdoutLog)).size;
    expect(size).toBeGreaterThanOrEqual(200 * 1024 * 1024);
    // The log's beginning and end are what memory holds.
    const file = await open(spec.stdoutLog, 'r');
    try {
      const headLen = r.stdout.indexOf('\n') + 1;
      const head = Buffer.alloc(headLen);
      await file.read(head, 0, headLen, 0);
      expect(head.toString('utf8')).toBe(r.stdout.slice(0, headLen));
      const tailText = r.stdout.slice(r.stdout.lastIndexOf('\n', r.stdout.length - 2) - 50_000);
      const tailLen = Buffer.byteLength(tailText);
      const tail = Buffer.alloc(tailLen);
      await file.read(tail, 0, tailLen, size - tailLen);
      expect(tail.toString('utf8')).toBe(tailText);
    } finally {
      await file.close();
    }

    expect(rssMax - rssBefore).toBeLessThan(100 * 1024 * 1024);
  }, 150_000);

  it('passes a prompt that starts with -- through stdin intact', async () => {
    const prompt = '--help --dangerously-skip-permissions -x';
    const { proc, record } = await start(prompt);
    const r = await proc.done;
    expect(r.exitCode).toBe(0);
    expect(json(r.stdout).result).toBe(`FAKE claude: ${prompt}`);
    expect(record().prompt).toBe(prompt);
    expect(record().argv).toEqual(ARGS.claude);
  });

  it('passes a 1 MB non-ASCII prompt through stdin intact', async () => {
    const unit = 'héllo wörld — 日本語 🎉 ñ\n';
    const prompt = unit.repeat(Math.ceil((1 << 20) / unit.length));
    const { proc, record } = await start(prompt, { name: 'codex', args: ARGS.codex });
    const r = await proc.done;
    expect(r).toMatchObject({ end: 'exited', exitCode: 0, stdoutTruncated: false });
    const message = r.stdout
      .split('\n')
      .map((l) => (l ? json(l) : {}))
      .find((e) => e.type === 'item.completed') as { item: { text: string } } | undefined;
    expect(message?.item.text === `FAKE codex: ${prompt}`).toBe(true); // no 2 MB diff on failure
    expect(record().prompt === prompt).toBe(true);
  });

  it('reads the prompt file only while it is the prompt: a link, a FIFO or other text there, and the prompt is piped', async () => {
    const outside = await tempDir();
    const secret = join(outside, 'secret');
    await writeFile(secret, 'SECRET KEY MATERIAL');
    const prompt = 'the real prompt';
    const replacements: [string, (path: string) => Promise<void>][] = [
      ['a link to a file of the user’s', (path) => symlink(secret, path)],
      ['a FIFO', async (path) => void execFileSync('mkfifo', [path])],
      ['other text', (path) => writeFile(path, 'an injected prompt, longer')],
    ];
    for (const [what, replace] of replacements) {
      const dir = await tempDir();
      const promptFile = join(dir, 'prompt.txt');
      await replace(promptFile);
      const { proc, record } = await start(prompt, { stdinFile: promptFile });
      expect((await proc.done).end, what).toBe('exited');
      expect(record().prompt, what).toBe(prompt);
    }
  });

  it('never writes a log through a link left in its place', async () => {
    const outside = await tempDir();
    const dir = await tempDir();
    const stdoutLog = join(dir, 'stdout.log');
    await symlink(join(outside, 'written-through'), stdoutLog);
    const { proc } = await start('hello', { stdoutLog });
    expect((await proc.done).end).toBe('spawn_error');
    expect(existsSync(join(outside, 'written-through'))).toBe(false);
  });

  it('reports a missing binary as spawn_error with a message', async () => {
    const dir = await tempDir();
    const r = await runProcess({
      file: join(dir, 'no-such-cli'),
      args: ['-p'],
      env: {},
      cwd: dir,
      stdin: 'hello',
      stdoutLog: join(dir, 'stdout.log'),
      stderrLog: join(dir, 'stderr.log'),
      timeoutMs: 10_000,
      graceMs: 1_000,
    }).done;
    expect(r.end).toBe('spawn_error');
    expect(r.spawnError).toMatch(/ENOENT|no-such-cli/);
  });

  it('removes variables the spec sets to undefined and sets the others', async () => {
    const saved = process.env.CLAUDECODE;
    process.env.CLAUDECODE = '1';
    try {
      const removed = await start('[[cli:echo-env:CLAUDECODE]]', {
        env: {
          CLAUDECODE: undefined,
          IS_SANDBOX: '1',
          FAKE_CLI_RECORD_ENV: 'POLYSPAWN_TEST_VAR',
          POLYSPAWN_TEST_VAR: 'x y',
        },
      });
      const r = await removed.proc.done;
      expect(json(r.stdout).result).toBe('');
      expect(removed.record().env).toEqual({ CLAUDECODE: null, IS_SANDBOX: '1', POLYSPAWN_TEST_VAR: 'x y' });

      // Without the removal the child inherits it: the check above is not vacuous.
      const kept = await start('[[cli:echo-env:CLAUDECODE]]');
      expect(json((await kept.proc.done).stdout).result).toBe('1');
    } finally {
      if (saved === undefined) delete process.env.CLAUDECODE;
      else process.env.CLAUDECODE = saved;
    }
  });
});

describe('the fake CLIs speak their vendor formats', () => {
  it('claude stream-json: init, assistant, result; --resume keeps the session id', async () => {
    const args = ['-p', '--output-format', 'stream-json', '--verbose', '--resume', 'sess-123'];
    const r = await (await start('again', { args })).proc.done;
    const events = r.stdout.trimEnd().split('\n').map(json);
    expect(events.map((e) => e.type)).toEqual(['system', 'assistant', 'result']);
    expect(events.every((e) => e.session_id === 'sess-123')).toBe(true);
    expect(events[2]).toMatchObject({ result: 'FAKE claude: again', is_error: false });
  });

  it('codex exec resume <id> - keeps the thread id; failure prints error and turn.failed', async () => {
    const args = ['exec', '--json', '--skip-git-repo-check', 'resume', 'thread-9', '-'];
    const r = await (await start('more', { name: 'codex', args })).proc.done;
    expect(json(r.stdout.split('\n')[0]!)).toEqual({ type: 'thread.started', thread_id: 'thread-9' });

    const failed = await (await start('[[cli:fail]]', { name: 'codex', args: ARGS.codex })).proc.done;
    expect(failed.exitCode).toBe(1);
    expect(
      failed.stdout
        .trimEnd()
        .split('\n')
        .map((l) => json(l).type),
    ).toEqual(['thread.started', 'turn.started', 'error', 'turn.failed']);
  });

  it('copilot: assistant.message, a final result, and the usage file', async () => {
    const dir = await tempDir();
    const usageFile = join(dir, 'usage.json');
    const args = [...ARGS.copilot, '--usage-output-file', usageFile];
    const r = await (await start('hi', { name: 'copilot', args })).proc.done;
    const events = r.stdout.trimEnd().split('\n').map(json);
    expect(events.find((e) => e.type === 'assistant.message')).toMatchObject({ data: { content: 'FAKE copilot: hi' } });
    expect(events.at(-1)).toMatchObject({
      type: 'result',
      exitCode: 0,
      usage: { premiumRequests: expect.any(Number) },
    });
    expect(JSON.parse(await readFile(usageFile, 'utf8'))).toHaveProperty('modelMetrics');

    const failed = await (await start('[[cli:fail]]', { name: 'copilot', args: ARGS.copilot })).proc.done;
    expect(failed.exitCode).toBe(1);
    expect(json(lastLine(failed.stdout))).toMatchObject({ type: 'result', exitCode: 1 });
  });

  it('malformed and truncated output still exit 0', async () => {
    const malformed = await (await start('[[cli:malformed]]')).proc.done;
    expect(malformed.exitCode).toBe(0);
    expect(() => JSON.parse(malformed.stdout)).toThrow();
    const truncated = await (await start('[[cli:truncated]]', { name: 'codex', args: ARGS.codex })).proc.done;
    expect(truncated.exitCode).toBe(0);
    expect(truncated.stdout.endsWith('\n')).toBe(false);
    expect(() => JSON.parse(lastLine(truncated.stdout))).toThrow();
  });
});
