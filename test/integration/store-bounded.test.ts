// A server's memory does not grow with the history: its RunStore holds the newest
// `keepFinished` finished jobs (the JobTable, the newest 100 of its own), and any older job is
// still answered from its record.json.
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { jobId } from '../helpers/ids.js';
import { Redactor } from '../../src/lib/redact.js';
import { RunStore } from '../../iac/store.js';
import { JobTable, type Executor, type JobRecord } from '../../src/jobs/table.js';
import { tempDir } from '../helpers/temp.js';

const openStore = (stateDir: string, keepFinished?: number) =>
  new RunStore({
    stateDir,
    redactor: new Redactor(),
    identity: { pid: process.pid, start: 'test' },
    ...(keepFinished ? { keepFinished } : {}),
  });

function finishedJob(i: number): JobRecord {
  const at = new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
  return {
    id: jobId('b', i),
    backend: 'codex',
    model: 'm',
    prompt: `job ${i}`,
    cwd: '/tmp',
    timeoutS: 60,
    extra: {},
    state: 'succeeded',
    createdAt: at,
    startedAt: at,
    endedAt: at,
    outcome: { ok: true, text: `answer ${i}`, costSource: 'unknown' },
  };
}

describe('bounded memory', () => {
  test('a store keeps the newest keepFinished finished jobs; counts and record files cover all of them', () => {
    const state = join(tempDir('bounded'), '.polyspawn');
    const writer = openStore(state);
    const jobs = Array.from({ length: 25 }, (_, i) => finishedJob(i));
    for (const j of jobs) {
      writer.claimId(j.id);
      writer.save(j);
    }
    const store = openStore(state, 10);
    expect(store.finished().map((r) => r.id)).toEqual(jobs.slice(-10).map((j) => j.id));
    expect(store.finishedCount).toBe(25);
    expect(store.newestFinished(50)).toEqual(
      jobs
        .slice(-10)
        .map((j) => j.id)
        .reverse(),
    );
    expect(store.line(jobs[24]!.id)).toMatchObject({ id: jobs[24]!.id, st: 'succeeded', t: 'job 24' });
    expect(store.line(jobs[0]!.id)).toBeUndefined();
    expect(store.get(jobs[0]!.id)?.outcome?.text).toBe('answer 0');
    // Unbounded by default (the status command reads the whole history).
    expect(openStore(state).finished()).toHaveLength(25);
  });

  test('a job table leaves its older finished jobs to the store, which answers for them', async () => {
    const state = join(tempDir('bounded'), '.polyspawn');
    const store = openStore(state);
    const execute: Executor = async () => ({
      state: 'succeeded',
      outcome: { ok: true, text: 'done', costSource: 'unknown' },
    });
    const table = new JobTable({ concurrency: 4, execute, store });
    table.onChange((job) => store.save(job));
    const ids: string[] = [];
    for (let i = 0; i < 150; i++)
      ids.push(
        table.submit({ backend: 'codex', model: 'm', prompt: `job ${i}`, cwd: '/tmp', timeoutS: 60, extra: {} }).id,
      );
    const waited = await table.waitFor(ids, { timeoutMs: 10_000, mode: 'all' });
    expect(waited.pending).toEqual([]);
    // All 150 answer, in memory or from the store; all() lists each once.
    for (const id of ids) expect(table.get(id)?.state, id).toBe('succeeded');
    expect(table.get(ids[0]!)).toMatchObject({ id: ids[0], outcome: { text: 'done' } });
    expect(
      table
        .all()
        .map((j) => j.id)
        .sort(),
    ).toEqual([...ids].sort());
    expect((table as unknown as { entries: Map<string, unknown> }).entries.size).toBeLessThanOrEqual(101);
  });
});
