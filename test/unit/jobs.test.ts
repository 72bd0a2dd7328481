import { describe, expect, test } from 'vitest';
import { JobTable, type Executor, type JobRequest, type WaitResult } from '../../src/jobs/table.js';

const request = (prompt = 'p'): JobRequest => ({
  backend: 'fake',
  model: 'm',
  prompt,
  cwd: '/',
  timeoutS: 10,
  extra: {},
});

/** An executor whose jobs end when the test says so (or when cancelled). */
function controlled() {
  const release = new Map<string, () => void>();
  const execute: Executor = (job, { signal }) =>
    new Promise((resolve) => {
      const ok = () =>
        resolve({ state: 'succeeded', outcome: { ok: true, text: `done ${job.prompt}`, costSource: 'unknown' } });
      release.set(job.prompt, ok);
      signal.addEventListener('abort', () =>
        resolve({ state: 'cancelled', outcome: { ok: false, text: '', costSource: 'unknown' } }),
      );
    });
  return { execute, finish: (prompt: string) => release.get(prompt)!() };
}

const tick = () => new Promise((r) => setTimeout(r, 10));

/**
 * A wait long enough that one never woken by the jobs' changes (only by its timer) fails the
 * test: what a waiting test passes as timeoutMs, and the time within which it must return.
 * Wide apart, so that a busy machine never makes a woken wait look like an expired one.
 */
const LONG_WAIT_MS = 60_000;
const WOKEN_WITHIN_MS = 20_000;

/** Times a wait from the moment it is called. */
function timed(wait: Promise<WaitResult>): Promise<WaitResult & { ms: number }> {
  const started = Date.now();
  return wait.then((r) => ({ ...r, ms: Date.now() - started }));
}

const expectWoken = (r: { ms: number }, by: string) =>
  expect(r.ms, `the wait returned only after ${r.ms} ms: not woken by ${by}`).toBeLessThan(WOKEN_WITHIN_MS);

describe('JobTable', () => {
  test('ids are short, distinct and typeable', () => {
    const table = new JobTable({ concurrency: 1, execute: controlled().execute });
    const ids = Array.from({ length: 500 }, () => table.submit(request()).id);
    expect(new Set(ids).size).toBe(500);
    for (const id of ids) expect(id).toMatch(/^[a-km-np-z2-9]{6}$/);
    void table.shutdown();
  });

  test('jobs past the concurrency limit wait in the queue', async () => {
    const { execute, finish } = controlled();
    const table = new JobTable({ concurrency: 2, execute });
    const [a, b, c] = ['a', 'b', 'c'].map((p) => table.submit(request(p)));
    await tick();
    expect([a!.state, b!.state, c!.state]).toEqual(['running', 'running', 'queued']);
    expect(table.counts).toEqual({ running: 2, queued: 1 });
    finish('a');
    await tick();
    expect([a!.state, c!.state]).toEqual(['succeeded', 'running']);
    expect(a!.outcome!.text).toBe('done a');
    expect(a!.startedAt! <= a!.endedAt!).toBe(true);
    finish('b');
    finish('c');
  });

  test('cancel: a queued job never starts, a running one is aborted', async () => {
    const { execute } = controlled();
    const table = new JobTable({ concurrency: 1, execute });
    const running = table.submit(request('r'));
    const queued = table.submit(request('q'));
    await tick();
    expect((await table.cancel(queued.id))!.state).toBe('cancelled');
    expect((await table.cancel(running.id))!.state).toBe('cancelled');
    await tick();
    expect(queued.startedAt).toBeUndefined();
    expect(await table.cancel('nope')).toBeUndefined();
  });

  test('waitFor: all, any, timeout and abort, each woken by its event, not by its timer', async () => {
    const { execute, finish } = controlled();
    const table = new JobTable({ concurrency: 5, execute });
    const ids = ['x', 'y'].map((p) => table.submit(request(p)).id);
    const any = timed(table.waitFor(ids, { timeoutMs: LONG_WAIT_MS, mode: 'any' }));
    const all = timed(table.waitFor(ids, { timeoutMs: LONG_WAIT_MS, mode: 'all' }));
    await tick();
    finish('x');
    const anyResult = await any;
    expectWoken(anyResult, 'the first job finishing');
    expect(anyResult.finished.map((j) => j.prompt)).toEqual(['x']);
    expect(anyResult.pending.map((j) => j.prompt)).toEqual(['y']);
    const timedOut = await table.waitFor(ids, { timeoutMs: 20, mode: 'all' });
    expect(timedOut.pending).toHaveLength(1);
    const controller = new AbortController();
    const aborted = timed(table.waitFor(ids, { timeoutMs: LONG_WAIT_MS, mode: 'all', signal: controller.signal }));
    controller.abort();
    const abortedResult = await aborted;
    expectWoken(abortedResult, 'the abort');
    expect(abortedResult.pending).toHaveLength(1);
    finish('y');
    const allResult = await all;
    expectWoken(allResult, 'the last job finishing');
    expect(allResult.finished).toHaveLength(2);
  }, 120_000);

  test('an executor that throws still ends its job, as failed, with the reason', async () => {
    const table = new JobTable({
      concurrency: 1,
      execute: async () => {
        throw new Error('kaboom');
      },
    });
    const job = table.submit(request());
    expectWoken(await timed(table.waitFor([job.id], { timeoutMs: LONG_WAIT_MS, mode: 'all' })), 'the job failing');
    expect(job.state).toBe('failed');
    expect(job.outcome!.error).toContain('kaboom');
  }, 120_000);

  test('every state change is reported, in order', async () => {
    const { execute, finish } = controlled();
    const table = new JobTable({ concurrency: 1, execute });
    const seen: string[] = [];
    table.onChange((j) => seen.push(j.state));
    const job = table.submit(request('s'));
    await tick();
    finish('s');
    expectWoken(await timed(table.waitFor([job.id], { timeoutMs: LONG_WAIT_MS, mode: 'all' })), 'the job finishing');
    expect(seen).toEqual(['queued', 'running', 'succeeded']);
  }, 120_000);

  test('shutdown cancels everything and waits for it', async () => {
    const { execute } = controlled();
    const table = new JobTable({ concurrency: 1, execute });
    const jobs = [table.submit(request('1')), table.submit(request('2'))];
    await tick();
    await table.shutdown();
    expect(jobs.map((j) => j.state)).toEqual(['cancelled', 'cancelled']);
  });
});
