// The clean-up every test file gets (test/setup/end-processes.ts): what a test spawned is found by
// its mark and ended, also a grandchild that left its process group, and nothing else is touched.
import { spawn } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { killMarked, markedProcesses, markSpawnsAs } from '../helpers/process-groups.js';
import { isGone, waitFor, waitGone } from '../helpers/processes.js';

describe('process clean-up after a test', () => {
  test('finds every process a test spawned, grandchildren that left its group included, and ends them all', async () => {
    markSpawnsAs('probe');
    // A leader in its own group, a child in that group, and a grandchild in a session of its own.
    const leader = spawn('sh', ['-c', 'sleep 300 & setsid sleep 300 & wait'], { detached: true, stdio: 'ignore' });
    markSpawnsAs('bystander');
    const bystander = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    await waitFor('the three marked processes', () => markedProcesses('probe').length === 3);
    const found = markedProcesses('probe');
    expect(found).toContain(leader.pid);
    expect(found).not.toContain(bystander.pid);

    expect(killMarked('probe').sort()).toEqual(found.sort());
    for (const pid of found) await waitGone(pid);
    expect(isGone(bystander.pid!)).toBe(false);
    expect(markedProcesses('bystander')).toEqual([bystander.pid]);
    killMarked('bystander');
    await waitGone(bystander.pid!);
  });

  test('never signals the test runner itself, nor a child left in its process group', async () => {
    markSpawnsAs('same-group');
    const child = spawn('sleep', ['300'], { stdio: 'ignore' }); // not detached: the worker's group
    await waitFor('the marked child', () => markedProcesses('same-group').length === 1);
    killMarked('same-group');
    await waitGone(child.pid!);
    expect(isGone(process.pid)).toBe(false);
  });
});
