// Every process a test starts, ended when the test is over, even when the test failed half-way.
// A test's children are told apart by a mark in their environment: set in this worker's
// process.env before each test (and before each file's beforeAll), inherited by whatever the test
// spawns, and by their children in turn, including grandchildren that left their process group.
// The worker's own /proc/<pid>/environ is the one it was started with, so it never carries a mark.
import { readdirSync, readFileSync } from 'node:fs';
import { procStat } from '../../src/lib/proc.js';

/** Not POLYSPAWN_*: test/helpers/rpc.ts drops those from a server's environment. */
export const MARK_VARIABLE = 'PS_TEST_PROCESS_MARK';

/** Marks what is spawned from now on as belonging to `owner` (a test, or a file's shared setup). */
export function markSpawnsAs(owner: string): void {
  process.env[MARK_VARIABLE] = `${process.pid}:${owner}`;
}

/** The pids of live processes whose environment carries the mark of `owner` (any owner of this worker: undefined). */
export function markedProcesses(owner?: string): number[] {
  const wanted = `\0${MARK_VARIABLE}=${process.pid}:${owner === undefined ? '' : `${owner}\0`}`;
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    let environ: string;
    try {
      environ = readFileSync(`/proc/${name}/environ`, 'latin1');
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
    if (`\0${environ}\0`.includes(wanted) && procStat(name)?.state !== 'Z') found.push(Number(name));
  }
  return found;
}

/**
 * SIGKILLs every marked process of `owner` and its process group, but never this worker's own
 * group (a child spawned without `detached` shares it). Returns the pids it found alive.
 */
export function killMarked(owner?: string): number[] {
  const pids = markedProcesses(owner);
  const ownGroup = procStat(process.pid)?.pgrp;
  for (const pid of pids) {
    const group = procStat(pid)?.pgrp;
    if (group !== undefined && group !== ownGroup && group > 1) signal(-group);
    signal(pid);
  }
  return pids;
}

function signal(target: number): void {
  try {
    process.kill(target, 'SIGKILL');
  } catch {
    // already gone
  }
}
