// The reaper: a sidecar that outlives the server by design. The server tells it on stdin
// which process groups are live ("+PGID MARK" / "-PGID" lines, MARK the run's mark:
// src/jobs/process/run-processes.ts). When its stdin ends, the server has exited or died (even
// by SIGKILL, which no handler can catch), and every group still listed is ended, with the
// run's processes that left it: SIGTERM, a grace period, then SIGKILL. Started with the first job.
import { spawn, type ChildProcess } from 'node:child_process';
import { liveRunProcesses } from './run-processes.js';

/**
 * Runs in the sidecar (`node -e`), so it may use only globals (require included): no imports,
 * no closure. `runProcesses` is liveRunProcesses, passed as its source text.
 */
function reaperMain(graceMs: number, runProcesses: typeof liveRunProcesses): void {
  process.title = 'polyspawn-reaper';
  const fs = require('node:fs') as typeof import('node:fs');
  const groups = new Map<number, string | undefined>();
  const signalAll = (signal: NodeJS.Signals) => {
    for (const [pgid, mark] of groups) {
      // Found before the group is signalled: a dying leader takes the ancestry of what it started.
      const strays = runProcesses(pgid, mark, fs)?.strays ?? [];
      for (const pid of [-pgid, ...strays]) {
        try {
          process.kill(pid, signal);
        } catch {
          // gone already
        }
      }
    }
  };
  let pending = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk: string) => {
    const lines = (pending + chunk).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      const [group, mark] = line.slice(1).split(' ');
      const pgid = Number(group);
      if (!Number.isInteger(pgid) || pgid <= 1) continue;
      if (line.startsWith('+')) groups.set(pgid, mark);
      else if (line.startsWith('-')) groups.delete(pgid);
    }
  });
  process.stdin.on('end', () => {
    if (groups.size === 0) process.exit(0);
    signalAll('SIGTERM');
    setTimeout(() => {
      signalAll('SIGKILL');
      process.exit(0);
    }, graceMs);
  });
  // Whoever signals the server and its terminal must not stop the reaper before its work.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
}

export class Reaper {
  private child: ChildProcess | undefined;
  /** Lines not yet written: a burst's groups go in one write, not one write (and one wake-up of the sidecar) each. */
  private pending = '';

  constructor(private readonly graceMs: number) {}

  /** `mark`: the run's mark (hex), which finds the run's processes that left the group. */
  watch(pgid: number, mark: string): void {
    this.send(`+${pgid} ${mark}`);
  }

  unwatch(pgid: number): void {
    this.send(`-${pgid}`);
  }

  private send(line: string): void {
    // Written at the end of the current task (after its microtasks), before the event loop goes
    // on: the groups a burst starts in one task cost one write and one wake-up of the sidecar.
    if (this.pending === '') queueMicrotask(() => this.flush());
    this.pending += `${line}\n`;
  }

  private flush(): void {
    const lines = this.pending;
    this.pending = '';
    if (!this.child) {
      const main = `(${reaperMain.toString()})(${this.graceMs}, ${liveRunProcesses.toString()})`;
      this.child = spawn(process.execPath, ['-e', main], {
        detached: true, // its own group, so a signal to the server's group does not reach it
        stdio: ['pipe', 'ignore', 'ignore'],
      });
      this.child.on('error', () => undefined);
      this.child.stdin!.on('error', () => undefined);
      // Neither the sidecar nor its pipe may keep the server alive.
      this.child.unref();
      (this.child.stdin as unknown as { unref(): void }).unref();
    }
    this.child.stdin!.write(lines);
  }
}
