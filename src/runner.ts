// The process runner: one child per job, in its own process group, prompt on stdin, output
// streamed to log files with only a bounded head and tail in memory, and the whole group
// ended on exit, timeout, cancel or server shutdown, so no grandchild outlives its job.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { HeadTailBuffer } from './head-tail-buffer.js';
import { Reaper } from './reaper.js';

export type RunSpec = {
  file: string;
  args: string[];
  /** Set (string) or remove (undefined) these variables on top of the server's environment. */
  env: Record<string, string | undefined>;
  cwd: string;
  stdin: string;
  stdoutLog: string;
  stderrLog: string;
  timeoutMs: number;
  /** Between SIGTERM and SIGKILL. */
  graceMs: number;
  signal?: AbortSignal;
};

export type RunEnd = 'exited' | 'timeout' | 'cancelled' | 'spawn_error';

export type RunResult = {
  end: RunEnd;
  exitCode: number | null;
  exitSignal: string | null;
  stdout: string;
  stdoutTruncated: boolean;
  stderr: string;
  spawnError?: string;
  /** Why a log file could not be written (a full or read-only disk); memory still kept the output. */
  logError?: string;
};

export type RunningProcess = {
  pid: number | undefined;
  /** The newest output, for showing progress while the job runs. */
  tail(maxChars: number): string;
  done: Promise<RunResult>;
};

const STDOUT_HEAD_BYTES = 1 << 20;
const STDOUT_TAIL_BYTES = 3 << 20;
const STDERR_TAIL_BYTES = 64 << 10;

/** Process groups started and not yet ended; shutdown kills every one of them. */
const liveGroups = new Set<number>();
/** Ends the live groups even if this process dies without running any handler. */
let reaper: Reaper | undefined;

export function runProcess(spec: RunSpec): RunningProcess {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, ...spec.env })) if (v !== undefined) env[k] = v;

  const stdout = new HeadTailBuffer(STDOUT_HEAD_BYTES, STDOUT_TAIL_BYTES);
  const stderr = new HeadTailBuffer(0, STDERR_TAIL_BYTES);
  const logs = [new LogFile(spec.stdoutLog), new LogFile(spec.stderrLog)] as const;

  // node:child_process directly: a job's start is on every spawn's path, and a wrapper's
  // stream plumbing costs more than the child here (see bench/). The child's stdin gets the
  // prompt and is closed (an open stdin hangs codex).
  let child: ChildProcess | undefined;
  let spawnError: string | undefined;
  try {
    child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env,
      detached: true, // its own process group, so a signal reaches every descendant
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  } catch (error) {
    spawnError = (error as Error).message; // e.g. an argument holding a NUL byte
  }
  const pgid = child?.pid;
  if (pgid !== undefined) {
    liveGroups.add(pgid);
    (reaper ??= new Reaper(spec.graceMs)).watch(pgid);
  }

  // Everything the child did, once its output is closed: its exit, or why it never started.
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (!child) return resolve({ code: null, signal: null });
    child.on('error', (error) => {
      if (child.pid === undefined) spawnError = error.message; // ENOENT, EACCES: 'close' follows
    });
    child.once('close', (code, signal) => resolve({ code, signal }));
    child.stdin!.once('error', () => undefined); // EPIPE: it exited without reading it all
    child.stdin!.end(spec.stdin);
    pump(child.stdout!, logs[0], stdout);
    pump(child.stderr!, logs[1], stderr);
  });

  let end: RunEnd = 'exited';
  let stopping: Promise<void> | undefined;
  const stop = (why: RunEnd) => {
    if (stopping) return;
    end = why;
    stopping = pgid === undefined ? Promise.resolve() : terminateGroup(pgid, spec.graceMs);
  };
  const timer = setTimeout(() => stop('timeout'), spec.timeoutMs);
  const onAbort = () => stop('cancelled');
  if (spec.signal?.aborted) onAbort();
  else spec.signal?.addEventListener('abort', onAbort, { once: true });

  // The leader may exit while descendants still hold its pipes open; end them so the
  // streams close and the job finishes.
  child?.once('exit', () => {
    if (pgid !== undefined && !stopping && groupAlive(pgid)) stopping = terminateGroup(pgid, spec.graceMs);
  });

  const done = (async (): Promise<RunResult> => {
    const result = await closed;
    for (const log of logs) log.close();
    clearTimeout(timer);
    spec.signal?.removeEventListener('abort', onAbort);
    await stopping;
    if (pgid !== undefined) {
      liveGroups.delete(pgid);
      reaper?.unwatch(pgid);
    }
    const spawnFailed = pgid === undefined;
    const out = stdout.text();
    const logError = logs.map((l) => l.error).find(Boolean);
    return {
      end: spawnFailed ? 'spawn_error' : end,
      exitCode: spawnFailed ? null : result.code,
      exitSignal: result.signal,
      stdout: out.text,
      stdoutTruncated: out.truncated,
      stderr: stderr.text().text,
      ...(spawnFailed ? { spawnError: spawnError ?? `could not start ${spec.file}` } : {}),
      ...(logError ? { logError } : {}),
    };
  })();

  return {
    pid: pgid,
    tail: (maxChars) => {
      const s = stdout.newest(maxChars);
      return s.length > 0 ? s : stderr.newest(maxChars);
    },
    done,
  };
}

/** Each chunk into the bounded memory buffer and the log file, as it comes. */
function pump(stream: Readable, log: LogFile, memory: HeadTailBuffer): void {
  stream.on('data', (chunk: Buffer) => {
    memory.push(chunk);
    log.write(chunk);
  });
}

/**
 * A run's log file, written synchronously: a write to the page cache takes microseconds, and
 * while it runs the pipe is not read, so a child that prints faster than the disk takes it
 * waits instead of the server buffering its output. A log that cannot be opened or written (a
 * full or read-only disk) is given up, not fatal: the job goes on, its output in memory.
 */
class LogFile {
  private fd: number | undefined;
  error: string | undefined;

  constructor(private readonly path: string) {
    try {
      this.fd = openSync(path, 'w');
    } catch (error) {
      this.fail(error);
    }
  }

  write(chunk: Buffer): void {
    if (this.fd === undefined) return;
    try {
      for (let at = 0; at < chunk.length; ) at += writeSync(this.fd, chunk, at);
    } catch (error) {
      this.fail(error);
    }
  }

  close(): void {
    if (this.fd === undefined) return;
    try {
      closeSync(this.fd);
    } catch (error) {
      this.fail(error); // a delayed write error (NFS, quota) surfaces on close
    }
    this.fd = undefined;
  }

  private fail(error: unknown): void {
    this.error ??= `could not write ${this.path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
    if (this.fd !== undefined) {
      const fd = this.fd;
      this.fd = undefined;
      try {
        closeSync(fd);
      } catch {
        // already reported
      }
    }
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch {
    return false;
  }
  // kill() also counts members that are dead but not yet reaped: a grandchild whose parent
  // died is reparented to init, which may reap it late (here: ~2 s) or never (a container
  // whose PID 1 does not reap). Such zombies hold no pipes and need no signal, so a group
  // of only zombies is over; otherwise every such job would wait out the whole grace period.
  return process.platform !== 'linux' || groupHasLiveMember(pgid);
}

function groupHasLiveMember(pgid: number): boolean {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return true;
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') return true;
  }
  return false;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

/** SIGTERM to the group, then SIGKILL once the grace period is over if anything is left. */
export async function terminateGroup(pgid: number, graceMs: number): Promise<void> {
  signalGroup(pgid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (groupAlive(pgid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (groupAlive(pgid)) signalGroup(pgid, 'SIGKILL');
}

/** For the last moment of shutdown, when no time is left for a grace period. */
export function killAllGroupsNow(): void {
  for (const pgid of liveGroups) signalGroup(pgid, 'SIGKILL');
}
