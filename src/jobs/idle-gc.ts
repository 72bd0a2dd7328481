// A full garbage collection once the job table goes idle (nothing queued or running for a
// second). V8 collects its old generation lazily: after a burst of jobs, the garbage of their
// processes, pipes and records would sit in the heap until V8's next major collection, which
// under a busy server comes late, so the resident size climbed with every burst (bench/burst.mjs)
// though the live heap did not. Collecting while idle costs a few milliseconds when nothing
// waits, and lets V8 size the heap from what the server actually holds.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { JobTable } from './table.js';

const IDLE_MS = 1000;

function gcFunction(): (() => void) | undefined {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
}

export function collectWhenIdle(jobs: JobTable): void {
  // Made on first use: a server that never runs a job never pays for it at start.
  let gc: (() => void) | undefined | null = null;
  let timer: NodeJS.Timeout | undefined;
  // A second after the last state change, if nothing is queued or running by then.
  jobs.onStateChange(() => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const { running, queued } = jobs.counts;
      if (running + queued > 0) return;
      if (gc === null) gc = gcFunction();
      gc?.();
    }, IDLE_MS).unref();
  });
}
