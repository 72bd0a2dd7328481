// Watching real processes from tests. Time bounds here only guard against hangs.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { procStat } from '../../src/lib/proc.js';
import { join } from 'node:path';

export async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Gone: kill(pid, 0) fails with ESRCH. A zombie also counts: it is dead, and whether it is
 * reaped at once depends on the machine's init (a grandchild is reparented to it).
 */
export function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return true;
    throw e;
  }
  try {
    return /^\d+ \(.*\) Z/s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true; // vanished between the two calls
  }
}

/** Live (not zombie) members of a process group: a job's group is its CLI's pid. */
export function groupMembers(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      const stat = procStat(pid);
      return stat?.pgrp === pgid && stat.state !== 'Z';
    })
    .map(Number);
}

export const waitGone = (pid: number, ms = 5_000) => waitFor(`process ${pid} to be gone`, () => isGone(pid), ms);

export type FakeCliRecord = {
  name: string;
  argv: string[];
  cwd: string;
  env: { [k: string]: string | null };
  prompt: string;
  /** The content of each file its arguments named, as it was when the CLI started. */
  files: { [path: string]: string };
};

/** The fake CLI's records in `dir` (its FAKE_CLI_RECORD), each with its process id (the file's name). */
export function fakeCliRecords(dir: string): (FakeCliRecord & { pid: number })[] {
  return readdirSync(dir)
    .filter((f) => /^\d+\.json$/.test(f))
    .map((f) => ({
      ...(JSON.parse(readFileSync(join(dir, f), 'utf8')) as FakeCliRecord),
      pid: Number(f.slice(0, -5)),
    }));
}

/** The fake CLI's records in `dir` of the runs whose prompt contains `marker`. */
export const recordsOf = (dir: string, marker: string) => fakeCliRecords(dir).filter((r) => r.prompt.includes(marker));

/** The record of the one run whose prompt contains `marker`: throws when none or several did. */
export function recordOf(dir: string, marker: string): FakeCliRecord & { pid: number } {
  const found = recordsOf(dir, marker);
  if (found.length !== 1) throw new Error(`${found.length} fake CLI runs saw ${marker}`);
  return found[0]!;
}

export function readRecord(dir: string, pid: number | undefined): FakeCliRecord {
  return JSON.parse(readFileSync(join(dir, `${pid}.json`), 'utf8')) as FakeCliRecord;
}

/** The fake CLI is ready (prompt read, SIGTERM handler installed) once its record exists. */
export const ready = (dir: string, pid: number | undefined) =>
  waitFor('the fake CLI to start', () => existsSync(join(dir, `${pid}.json`)));
