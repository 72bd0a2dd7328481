// The reaper: a sidecar that outlives the server by design. The server tells it on stdin
// which process groups are live ("+PGID" / "-PGID" lines). When its stdin ends, the server
// has exited or died (even by SIGKILL, which no handler can catch), and every group still
// listed is ended: SIGTERM, a grace period, then SIGKILL. Started with the first job.
import { spawn, type ChildProcess } from 'node:child_process';

/** Runs in the sidecar (`node -e`), so it may use only globals: no imports, no closure. */
function reaperMain(graceMs: number): void {
  process.title = 'polyspawn-reaper';
  const groups = new Set<number>();
  const signalAll = (signal: NodeJS.Signals) => {
    for (const pgid of groups) {
      try {
        process.kill(-pgid, signal);
      } catch {
        groups.delete(pgid); // already gone
      }
    }
  };
  let pending = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk: string) => {
    const lines = (pending + chunk).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      const pgid = Number(line.slice(1));
      if (!Number.isInteger(pgid) || pgid <= 1) continue;
      if (line.startsWith('+')) groups.add(pgid);
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

  watch(pgid: number): void {
    this.send(`+${pgid}`);
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
      this.child = spawn(process.execPath, ['-e', `(${reaperMain.toString()})(${this.graceMs})`], {
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
