// The process runner: one child per job, in its own process group, prompt on stdin, its
// stdout and stderr written by the child itself straight into the run's log files, and the
// whole group ended on exit, timeout, cancel or server shutdown, so no grandchild outlives
// its job; nor one that left the group (setsid): each run's processes carry a mark of its own
// in their environment (src/jobs/process/run-processes.ts). The server reads the output back once the child has exited (src/jobs/process/log-reader.ts):
// no pipe to drain while it runs, and a child that prints gigabytes costs the server nothing.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { closeSync, constants, fstatSync, openSync } from 'node:fs';
import { openRegularFile, PRIVATE_FILE } from '../../lib/fs.js';
import { readHeadAndTail, readNewest } from './log-reader.js';
import { Reaper } from './reaper.js';
import { liveRunProcesses, RUN_MARK_ENV } from './run-processes.js';

export type RunSpec = {
  file: string;
  args: string[];
  /**
   * The environment the child starts from: polyspawn's own (the app's env). When absent, this
   * process's, as for child_process.spawn (the runner used on its own, as its tests do).
   */
  baseEnv?: Readonly<Record<string, string | undefined>>;
  /** Set (string) or remove (undefined) these variables on top of baseEnv. */
  env: Record<string, string | undefined>;
  cwd: string;
  stdin: string;
  /**
   * A file that holds exactly `stdin`: the child reads it from there, and no pipe (nor the
   * server's stream over it) is made. Used when it can be opened; otherwise `stdin` is piped.
   */
  stdinFile?: string;
  stdoutLog: string;
  stderrLog: string;
  timeoutMs: number;
  /** Between SIGTERM and SIGKILL. */
  graceMs: number;
  signal?: AbortSignal;
  /** On time-out and cancel, beside the group kill: ends what it cannot reach (a sandbox's container). */
  stop?: () => Promise<void>;
  /** Open files the child gets as its fds 3, 4, ... (a sandbox's pinned folders); closed here once it has them. */
  passFds?: number[];
  /**
   * The child's stdin and stdout are pipes the caller speaks a protocol over (an ACP agent,
   * src/jobs/acp/): `stdin` is not written, stdout is not logged here (the caller keeps
   * `stdoutLog` itself) and the result's stdout is empty; stderr still goes to its log.
   */
  pipes?: boolean;
};

type RunEnd = 'exited' | 'timeout' | 'cancelled' | 'spawn_error';

export type RunResult = {
  end: RunEnd;
  exitCode: number | null;
  exitSignal: string | null;
  stdout: string;
  stdoutTruncated: boolean;
  stderr: string;
  spawnError?: string;
  /** The system's error code of a spawn error (ENOENT, EACCES, E2BIG), where it gave one. */
  spawnErrorCode?: string;
};

type RunningProcess = {
  pid: number | undefined;
  /** The value of RUN_MARK_ENV its processes carry (recorded, so a later server can find them). */
  mark: string;
  /** With `pipes`: the child's stdin and stdout, until it exits. */
  pipes?: { stdin: Writable; stdout: Readable };
  /** The newest output, for showing progress while the job runs. */
  tail(maxChars: number): string;
  done: Promise<RunResult>;
};

const STDOUT_HEAD_BYTES = 1 << 20;
const STDOUT_TAIL_BYTES = 3 << 20;
const STDERR_TAIL_BYTES = 64 << 10;

/** A run's stdout log as parse() gets it: its head and tail when it is very long. */
export const readStdoutLog = (path: string) => readHeadAndTail(path, STDOUT_HEAD_BYTES, STDOUT_TAIL_BYTES);

/** Process groups started and not yet ended, with their runs' marks; shutdown kills every one of them. */
const liveGroups = new Map<number, string>();
/** Ends the live groups even if this process dies without running any handler. */
let reaper: Reaper | undefined;

/** The child's environment: `changes` set or removed on top of `base` (this process's when absent). */
export function childEnv({
  baseEnv = process.env,
  env: changes,
}: Pick<RunSpec, 'baseEnv' | 'env'>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...baseEnv, ...changes })) if (v !== undefined) env[k] = v;
  return env;
}

/** A log is written, never through a link (an agent can write its own run folder, and a retry opens its logs again). */
const LOG_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/** Starts the child in a process group of its own, writing straight into its logs; or says why it could not. */
function startChild(spec: RunSpec, mark: string): { child: ChildProcess } | { error: NodeJS.ErrnoException } {
  const fds: number[] = [...(spec.passFds ?? [])];
  try {
    const stdinFd = spec.stdinFile === undefined ? undefined : openIfPresent(spec.stdinFile, spec.stdin);
    if (stdinFd !== undefined) fds.push(stdinFd);
    const [stdout, stderr] = (spec.pipes ? [spec.stderrLog] : [spec.stdoutLog, spec.stderrLog]).map((path) => {
      const fd = openSync(path, LOG_FLAGS, PRIVATE_FILE);
      fds.push(fd);
      return fd;
    });
    // The child's stdin gets the prompt and is closed (an open stdin hangs codex).
    const child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: { ...childEnv(spec), [RUN_MARK_ENV]: mark },
      detached: true, // its own process group, so a signal reaches every descendant
      stdio: spec.pipes
        ? ['pipe', 'pipe', stdout, ...(spec.passFds ?? [])]
        : [stdinFd ?? 'pipe', stdout, stderr, ...(spec.passFds ?? [])],
    });
    return { child };
  } catch (error) {
    // A log that cannot be created (the executor chose a writable folder: a race), or an
    // argument holding a NUL byte.
    return { error: error as NodeJS.ErrnoException };
  } finally {
    for (const fd of fds) closeSync(fd); // the child holds its own copies
  }
}

export function runProcess(spec: RunSpec): RunningProcess {
  const mark = randomBytes(16).toString('hex');
  const started = startChild(spec, mark);
  const child = 'child' in started ? started.child : undefined;
  let spawnError = 'error' in started ? started.error.message : undefined;
  let spawnErrorCode = 'error' in started ? started.error.code : undefined;
  const pgid = child?.pid;
  if (pgid !== undefined) {
    liveGroups.set(pgid, mark);
    (reaper ??= new Reaper(spec.graceMs)).watch(pgid, mark);
  }

  // How the child ended, or why it never started (ENOENT, EACCES: an 'error' and no 'exit').
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (!child) return resolve({ code: null, signal: null });
    child.on('error', (error) => {
      if (child.pid !== undefined) return; // a failed kill(): the child still runs
      spawnError = error.message;
      spawnErrorCode = (error as NodeJS.ErrnoException).code;
      resolve({ code: null, signal: null });
    });
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.stdin?.once('error', () => undefined); // EPIPE: it exited without reading it all
    if (!spec.pipes) child.stdin?.end(spec.stdin);
  });

  let end: RunEnd = 'exited';
  let stopping: Promise<void> | undefined;
  const stop = (why: RunEnd) => {
    if (stopping) return;
    end = why;
    const group = pgid === undefined ? Promise.resolve() : terminateGroup(pgid, spec.graceMs, mark);
    stopping = spec.stop ? Promise.all([spec.stop(), group]).then(() => undefined) : group;
  };
  const timer = setTimeout(() => stop('timeout'), spec.timeoutMs);
  const onAbort = () => stop('cancelled');
  if (spec.signal?.aborted) onAbort();
  else spec.signal?.addEventListener('abort', onAbort, { once: true });

  const done = (async (): Promise<RunResult> => {
    const result = await exited;
    clearTimeout(timer);
    spec.signal?.removeEventListener('abort', onAbort);
    // Descendants the leader left behind would go on writing to its logs: end them first.
    if (pgid !== undefined && !stopping && runAlive(pgid, mark)) stopping = terminateGroup(pgid, spec.graceMs, mark);
    await stopping;
    if (pgid === undefined) {
      return {
        end: 'spawn_error',
        exitCode: null,
        exitSignal: null,
        stdout: '',
        stdoutTruncated: false,
        stderr: '',
        spawnError: spawnError ?? `could not start ${spec.file}`,
        ...(spawnErrorCode ? { spawnErrorCode } : {}),
      };
    }
    liveGroups.delete(pgid);
    reaper?.unwatch(pgid);
    const stdout = spec.pipes ? { text: '', truncated: false } : readStdoutLog(spec.stdoutLog);
    return {
      end,
      exitCode: result.code,
      exitSignal: result.signal,
      stdout: stdout.text,
      stdoutTruncated: stdout.truncated,
      stderr: readHeadAndTail(spec.stderrLog, 0, STDERR_TAIL_BYTES).text,
    };
  })();

  return {
    pid: pgid,
    mark,
    pipes: spec.pipes && child?.stdin && child.stdout ? { stdin: child.stdin, stdout: child.stdout } : undefined,
    tail: (maxChars) => readNewest(spec.stdoutLog, maxChars) || readNewest(spec.stderrLog, maxChars),
    done,
  };
}

/**
 * The prompt file, unless it is gone, or no longer a regular file of the prompt's length (an
 * agent can write its own run folder, and a retry reads the file again): then the prompt is piped.
 */
function openIfPresent(path: string, text: string): number | undefined {
  let fd: number;
  try {
    fd = openRegularFile(path);
  } catch {
    return undefined;
  }
  if (fstatSync(fd).size === Buffer.byteLength(text)) return fd;
  closeSync(fd);
  return undefined;
}

/**
 * Whether a process of the run is left: of its group, or marked as its own (`mark`). Dead
 * members not yet reaped do not count: a grandchild whose parent died is reparented to init,
 * which may reap it late (here: ~2 s) or never (a container whose PID 1 does not reap). Such
 * zombies hold no pipes and need no signal; otherwise every such job would wait out the whole
 * grace period.
 */
function runAlive(pgid: number | undefined, mark: string | undefined): boolean {
  const found = process.platform === 'linux' ? liveRunProcesses(pgid ?? NO_GROUP, mark, fs) : undefined;
  if (found) return found.group.length + found.strays.length > 0;
  if (pgid === undefined) return false;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function signalRun(pgid: number | undefined, mark: string | undefined, signal: NodeJS.Signals): void {
  // Found before the group is signalled: a leader that dies takes the ancestry of what it
  // started with it (they are reparented to init).
  const strays = process.platform === 'linux' ? (liveRunProcesses(pgid ?? NO_GROUP, mark, fs)?.strays ?? []) : [];
  if (pgid !== undefined)
    try {
      process.kill(-pgid, signal);
    } catch {
      // ESRCH: the group is already gone.
    }
  for (const pid of strays) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone meanwhile
    }
  }
}

/** No process group is ever -1: with it, a run's processes are found by their mark alone. */
const NO_GROUP = -1;

/** How long SIGKILLed processes get to vanish before a run's end is reported anyway. */
const KILL_TEARDOWN_MS = 5_000;

/**
 * SIGTERM to the group and to the run's processes that left it (those marked `mark`, and their
 * descendants), then SIGKILL once the grace period is over if anything is left. Without `pgid`
 * (a dead server's group whose leader cannot be proven its own), the marked processes only.
 */
export async function terminateGroup(pgid: number | undefined, graceMs: number, mark?: string): Promise<void> {
  signalRun(pgid, mark, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (runAlive(pgid, mark) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (!runAlive(pgid, mark)) return;
  signalRun(pgid, mark, 'SIGKILL');
  // A killed process lives on until the kernel has torn it down (a large one for a while): a run
  // that reports its end must have nothing left, so wait for that too, within a bound.
  const killedBy = Date.now() + KILL_TEARDOWN_MS;
  while (runAlive(pgid, mark) && Date.now() < killedBy) await new Promise((r) => setTimeout(r, 20));
}

/** For the last moment of shutdown, when no time is left for a grace period. */
export function killAllGroupsNow(): void {
  for (const [pgid, mark] of liveGroups) signalRun(pgid, mark, 'SIGKILL');
}
