// Is the process that wrote a record still the same live process? A pid alone is not enough:
// pids are reused. On Linux a process is named by its pid plus its start time (field 22 of
// /proc/<pid>/stat, in clock ticks since boot) plus the boot id; elsewhere by its pid only.
import { readFileSync, readlinkSync, statSync } from 'node:fs';

let bootId: string | undefined | null = null;
function boot(): string | undefined {
  if (bootId === null) {
    try {
      bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim().slice(0, 8);
    } catch {
      bootId = undefined;
    }
  }
  return bootId;
}

/** A process's state letter, process group and start time (clock ticks since boot), or undefined where it or /proc is gone. */
export function procStat(
  pid: number | string,
): { state: string; ppid: number; pgrp: number; start: string } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, ppid: Number(fields[1]), pgrp: Number(fields[2]), start: fields[19]! };
  } catch {
    return undefined;
  }
}

/** "<boot id>:<start ticks>" of a live process, or undefined where /proc is not there. */
export function processStart(pid: number): string | undefined {
  const s = procStat(pid);
  return s ? `${boot() ?? '?'}:${s.start}` : undefined;
}

/**
 * Whether `pid` is alive and, when `start` was recorded, still the process that was started
 * then. A zombie counts as gone.
 */
export function sameProcessAlive(pid: number, start: string | undefined): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const s = procStat(pid);
  if (!s) return process.platform !== 'linux'; // no /proc: the pid check is all there is
  if (s.state === 'Z' || s.state === 'X') return false;
  return start === undefined || start === `${boot() ?? '?'}:${s.start}`;
}

export type ProcessIdentity = { pid: number; start?: string };

export const selfIdentity = (): ProcessIdentity => {
  const start = processStart(process.pid);
  return start ? { pid: process.pid, start } : { pid: process.pid };
};

/** How far up the process tree ancestorVariables looks (a deeper tree is no agent's). */
const MAX_ANCESTORS = 64;

/**
 * The variables named by `names` as the nearest ancestor process started with the first of
 * them was started with (/proc/<pid>/environ), or an empty object: none was, or there is no /proc.
 * Ancestors whose environment cannot be read (another user's, such as sshd) are passed over.
 * This survives a parent that clears the environment of the process it starts.
 */
export function ancestorVariables(names: readonly string[], from = process.ppid): Record<string, string> {
  for (let pid = from, seen = 0; pid > 1 && seen < MAX_ANCESTORS; seen++) {
    // An environment not ours to read, or gone: look further up.
    const env = processEnvironment(pid);
    if (env?.[names[0]!] !== undefined) {
      return Object.fromEntries(names.filter((name) => env[name] !== undefined).map((name) => [name, env[name]!]));
    }
    const parent = procStat(pid)?.ppid;
    if (parent === undefined) break;
    pid = parent;
  }
  return {};
}

/** Whether `ancestor` is `pid`'s parent, grandparent or further up (not `pid` itself). */
export function descendsFrom(pid: number, ancestor: number): boolean {
  for (let at = procStat(pid)?.ppid, seen = 0; at !== undefined && at > 1 && seen < MAX_ANCESTORS; seen++) {
    if (at === ancestor) return true;
    at = procStat(at)?.ppid;
  }
  return false;
}

/** What a live process of this user was started as: its arguments, environment and working folder; undefined when not readable. */
export function processLaunch(pid: number): { argv: string[]; env: Record<string, string>; cwd: string } | undefined {
  const env = processEnvironment(pid);
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
    return env && { argv, env, cwd: readlinkSync(`/proc/${pid}/cwd`) };
  } catch {
    return undefined;
  }
}

/** The environment a process was started with (/proc/<pid>/environ), or undefined when not ours to read or gone. */
function processEnvironment(pid: number): Record<string, string> | undefined {
  try {
    const env: Record<string, string> = {};
    for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
      const at = entry.indexOf('=');
      if (at > 0) env[entry.slice(0, at)] = entry.slice(at + 1);
    }
    return env;
  } catch {
    return undefined;
  }
}

/** The user id a process runs as, or undefined where it or /proc is gone. */
export function processOwner(pid: number): number | undefined {
  return statSync(`/proc/${pid}`, { throwIfNoEntry: false })?.uid;
}
