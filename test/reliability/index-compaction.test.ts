// index.jsonl compacted while other processes append to it (iac/index-file.ts): two processes
// record jobs in a tight loop, each the way a server does (RunStore.save: queued, running,
// succeeded), while this one compacts the index again and again and a follower reads it the
// way a server follows it (refresh: by offset, noticing each replacement). No line is lost, no
// run counted twice, and the follower ends with the same state as a reader that reads it once.
// Runs the built store (dist/), like the other reliability tests.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, test } from 'vitest';
import type { RunStore as Store } from '../../iac/store.js';
import type { Redactor as Redact } from '../../src/lib/redact.js';
import { jobId } from '../helpers/ids.js';
import { repoRoot } from '../helpers/mcp.js';
import { tempDir } from '../helpers/temp.js';

const dist = (path: string) => pathToFileURL(join(repoRoot, 'dist', path)).href;
const JOBS = 600;

/** One process recording JOBS jobs as fast as it can, ids jobId(prefix, 0)... */
const appender = (stateDir: string, prefix: string) => `
  const { RunStore } = await import(${JSON.stringify(dist('iac/store.js'))});
  const { Redactor } = await import(${JSON.stringify(dist('src/lib/redact.js'))});
  const { selfIdentity } = await import(${JSON.stringify(dist('src/lib/proc.js'))});
  const store = new RunStore({ stateDir: ${JSON.stringify(stateDir)}, redactor: new Redactor(), identity: selfIdentity() });
  for (let i = 0; i < ${JOBS}; i++) {
    const id = (${jobId.toString()})('${prefix}', i);
    const job = { id, backend: 'claude', model: 'sonnet', prompt: 'job ' + id, cwd: '/tmp', timeoutS: 60, extra: {},
      state: 'queued', createdAt: new Date().toISOString() };
    store.claimId(id);
    store.save(job);
    store.save({ ...job, state: 'running', startedAt: new Date().toISOString() });
    store.save({ ...job, state: 'succeeded', startedAt: job.createdAt, endedAt: new Date().toISOString(),
      outcome: { ok: true, text: 'ok', costSource: 'unknown' } });
  }
`;

describe('compacting the index while others append', () => {
  test('no line lost, no run twice, every reader converges', { timeout: 120_000 }, async () => {
    const { RunStore } = (await import(dist('iac/store.js'))) as { RunStore: typeof Store };
    const { Redactor } = (await import(dist('src/lib/redact.js'))) as { Redactor: typeof Redact };
    const stateDir = join(tempDir('compact'), '.polyspawn');
    const open = (keepFinished?: number) =>
      new RunStore({
        stateDir,
        redactor: new Redactor(),
        identity: { pid: process.pid, start: 'compactor' },
        ...(keepFinished ? { keepFinished } : {}),
      });
    const compactor = open();
    const follower = open();
    const bounded = open(100);

    const children = ['a', 'b'].map((prefix) =>
      spawn(process.execPath, ['--input-type=module', '-e', appender(stateDir, prefix)], { stdio: 'inherit' }),
    );
    const exits = children.map((child) => once(child, 'exit'));
    let running = children.length;
    for (const exit of exits) void exit.then(() => running--);
    let compactions = 0;
    while (running > 0) {
      if (compactor.compact(true)) compactions++;
      follower.refresh();
      bounded.refresh();
      await new Promise((r) => setTimeout(r, compactions % 5));
    }
    for (const [code] of await Promise.all(exits)) expect(code).toBe(0);
    // The compactions did race the appends: many generations while the lines went in.
    expect(compactions).toBeGreaterThan(10);
    const generation = () => JSON.parse(readFileSync(join(stateDir, 'index.jsonl'), 'utf8').split('\n')[0]!).gen;
    expect(generation()).toBe(compactions);

    const expected = ['a', 'b'].flatMap((p) => Array.from({ length: JOBS }, (_, i) => jobId(p, i)));
    const state = (store: Store) => ({
      count: store.finishedCount,
      finished: store.finished().map((r) => `${r.id}:${r.state}`),
      active: store.active().map((l) => l.id),
    });
    const once_ = open();
    follower.refresh();
    const read = state(once_);
    expect(read.count).toBe(expected.length);
    expect(read.active).toEqual([]);
    expect([...read.finished].sort()).toEqual(expected.map((id) => `${id}:succeeded`).sort());
    // (Their order may differ from the order they finished by a swap: a line copied over by a
    // compaction lands after its server's next one.)
    expect(state(follower)).toEqual(read);
    bounded.refresh();
    expect(bounded.finishedCount).toBe(expected.length);
    expect(bounded.newestFinished(100)).toEqual(once_.newestFinished(100));

    // Once more with nothing appending: the base holds each run once.
    expect(compactor.compact(true)).toBe(true);
    const base = readFileSync(join(stateDir, 'index.base.jsonl'), 'utf8').trim().split('\n');
    expect(base.length).toBe(expected.length);
    expect(new Set(base.map((l) => JSON.parse(l).id)).size).toBe(expected.length);
    follower.refresh();
    expect(state(follower)).toEqual(state(open()));
  });
});
