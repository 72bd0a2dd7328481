// index.jsonl compacted (iac/index-file.ts), on a real file system, in one process: a reader that
// followed the old file notices the new one even when it is as long or longer, a crashed
// compaction's leftovers are ignored, a line copied late never moves a run back, a line appended
// while a compaction reads reaches the new file, and a finished run copied late is in the base once.
// (test/reliability/index-compaction.test.ts races appends in other processes against it.)
import { appendFileSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { jobId } from '../helpers/ids.js';
import { jobRecord } from '../helpers/records.js';
import { compactIndex } from '../../iac/index-file.js';
import { readIndexLine } from '../../iac/index-line.js';
import { RunStore } from '../../iac/store.js';
import { Redactor } from '../../src/lib/redact.js';
import { processStart } from '../../src/lib/proc.js';
import type { JobRecord, JobState } from '../../src/jobs/table.js';
import { tempDir } from '../helpers/temp.js';

const me = { pid: process.pid, start: processStart(process.pid) ?? 'x' };
const setup = () => {
  const stateDir = join(tempDir('store-compact'), '.polyspawn');
  const open = (keepFinished?: number) =>
    new RunStore({ stateDir, redactor: new Redactor(), identity: me, ...(keepFinished ? { keepFinished } : {}) });
  return { stateDir, open, index: join(stateDir, 'index.jsonl'), base: join(stateDir, 'index.base.jsonl') };
};
let counter = 0;
const job = (state: JobState): JobRecord => jobRecord(jobId('c', counter++), state);
const state = (store: RunStore) => ({
  count: store.finishedCount,
  finished: store.finished().map((r) => `${r.id}:${r.state}`),
  active: store.active().map((l) => `${l.id}:${l.st}`),
});

test('a follower notices the compacted file although it is as long or longer, and converges', () => {
  const { open, index } = setup();
  const writer = open();
  for (let i = 0; i < 20; i++) writer.save(job('succeeded'));
  const running = job('running');
  writer.save(running);
  const follower = open();
  const bounded = open(5);
  follower.refresh();
  bounded.refresh();
  const before = statSync(index).size;

  expect(writer.compact()).toBe(false); // small: left as it is
  expect(writer.compact(true)).toBe(true);
  const compacted = readFileSync(index, 'utf8').split('\n');
  expect(JSON.parse(compacted[0]!)).toMatchObject({ gen: 1, done: 20 });
  expect(compacted.slice(1, -1).map((l) => JSON.parse(l).id)).toEqual([running.id]);
  // Grown past what the follower had read: a size check alone would read on from its old offset.
  while (statSync(index).size <= before) writer.save(job('succeeded'));
  writer.save({ ...running, state: 'succeeded', endedAt: new Date().toISOString() });

  follower.refresh();
  bounded.refresh();
  const fresh = open();
  expect(state(follower)).toEqual(state(fresh));
  expect(fresh.active()).toEqual([]);
  expect(bounded.finishedCount).toBe(fresh.finishedCount);
  expect(bounded.newestFinished(5)).toEqual(fresh.newestFinished(5));
  // A server holding 5 read the base's newest lines, not all of them.
  expect(open(5).finished()).toHaveLength(5);
});

test('a crashed compaction’s bytes past the base’s length are ignored, then replaced', () => {
  const { open, base } = setup();
  const writer = open();
  for (let i = 0; i < 3; i++) writer.save(job('succeeded'));
  writer.compact(true);
  appendFileSync(base, '{"id":"zzzzzz","st":"succeeded","b":"x","m":"m","t":"t","c":""}\n');
  expect(open().finishedCount).toBe(3);
  writer.save(job('succeeded'));
  writer.compact(true);
  expect(readFileSync(base, 'utf8').trim().split('\n')).toHaveLength(4);
  expect(open().finishedCount).toBe(4);
});

test('a line that arrives late never moves its run back', () => {
  const { open, index } = setup();
  const writer = open();
  const late = job('queued');
  writer.save(late);
  writer.save({ ...late, state: 'running' });
  writer.save({ ...late, state: 'succeeded', endedAt: new Date().toISOString() });
  const lines = readFileSync(index, 'utf8').trim().split('\n');
  appendFileSync(index, `${lines[1]}\n${lines[0]}\n`); // running, queued: copies made late
  expect(state(open())).toEqual({ count: 1, finished: [`${late.id}:succeeded`], active: [] });
  writer.compact(true);
  expect(state(open())).toEqual({ count: 1, finished: [`${late.id}:succeeded`], active: [] });
});

test('a line another server appends while a compaction reads the index reaches the file that replaces it', () => {
  const { open, stateDir } = setup();
  const writer = open();
  for (let i = 0; i < 3; i++) writer.save(job('succeeded'));
  const running = job('running');
  writer.save(running);
  const other = open();
  const late = job('succeeded');
  let appended = false;
  compactIndex(stateDir, (raw) => {
    // Another server's save, after this compaction's read began and before its rename: its
    // appender finds index.jsonl still the file it wrote to, so only the compaction can carry it over.
    if (!appended) other.save(late);
    appended = true;
    const { line, text } = readIndexLine(raw);
    return line && { id: line.id, st: line.st, raw: text! };
  });
  const fresh = open();
  expect(fresh.finishedCount).toBe(4);
  expect(fresh.finished().map((r) => r.id)).toContain(late.id);
  expect(state(fresh).active).toEqual([`${running.id}:running`]);
});

test('a finished line copied late into the live file is not added to the base a second time', () => {
  const { open, index, base } = setup();
  const writer = open();
  for (let i = 0; i < 3; i++) writer.save(job('succeeded'));
  writer.compact(true);
  // A copy made late (its appender saw the replacement before the compaction had read it).
  appendFileSync(index, `${readFileSync(base, 'utf8').split('\n')[0]}\n`);
  writer.save(job('succeeded'));
  writer.compact(true);
  const ids = readFileSync(base, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).id);
  expect(ids).toHaveLength(4);
  expect(new Set(ids).size).toBe(4);
  expect(open().finishedCount).toBe(4);
});
