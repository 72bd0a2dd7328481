// The run store reading back files that are damaged (a crash, a full disk, a cloned or edited
// .polyspawn/, an agent writing its own run folder): a damaged index line is skipped, counted and
// reported once, never a run; a damaged header keeps the history in the base; a damaged
// record.json reads as what the index says, with an error saying so, never "no agent".
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  copyFileSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { jobId } from '../helpers/ids.js';
import { jobRecord } from '../helpers/records.js';
import { RunStore } from '../../iac/store.js';
import { Redactor } from '../../src/lib/redact.js';
import { processStart } from '../../src/lib/proc.js';
import type { JobRecord, JobState, JobTable } from '../../src/jobs/table.js';
import { AgentSessions } from '../../src/jobs/agents/sessions.js';
import { TeamFiles } from '../../iac/teams.js';
import { tempDir } from '../helpers/temp.js';

const me = { pid: process.pid, start: processStart(process.pid) ?? 'x' };
const setup = () => {
  const stateDir = join(tempDir('store-damaged'), '.polyspawn');
  const logged: string[] = [];
  const open = (options: { keepFinished?: number } = {}) =>
    new RunStore({ stateDir, redactor: new Redactor(), identity: me, onDamage: (m) => logged.push(m), ...options });
  return { stateDir, open, logged, index: join(stateDir, 'index.jsonl'), base: join(stateDir, 'index.base.jsonl') };
};
let counter = 0;
function finishedJob(store: RunStore, state: JobState = 'succeeded'): JobRecord {
  const job = jobRecord(jobId('d', counter++), 'queued');
  store.claimId(job.id);
  store.save(job);
  Object.assign(job, {
    state,
    endedAt: new Date().toISOString(),
    outcome: { ok: state === 'succeeded', text: `answer ${job.id}`, costSource: 'reported', costUsd: 0.5 },
  });
  store.save(job);
  return job;
}
const line = (fields: Record<string, unknown>) =>
  JSON.stringify({ id: 'abcdef', st: 'succeeded', b: 'x', m: 'm', t: 't', c: '2026-01-01T00:00:00Z', ...fields });

describe('damaged index lines', () => {
  test('each is skipped and counted, none becomes a run, the log hears of them once', () => {
    const { open, index, logged } = setup();
    const writer = open();
    const first = finishedJob(writer);
    // Lines 3 to 15 (the first job's two lines are 1 and 2).
    const damaged = [
      line({ id: 'zzzzzz', st: 'exploded' }), // an unknown state
      line({ id: 'ab0de1' }), // an id outside the alphabet
      line({ id: 'abcdefg' }), // seven characters
      line({ id: 'zzzzzz', st: 'running', b: undefined }), // a field missing: once a phantom interrupted run
      line({ id: 'zzzzzz', usd: 'lots' }), // a wrong-typed field
      '[1,2,3]',
      'null',
      '"a string"',
      '{"id":"zzzzzz","st":"succ', // truncated
      `{"id":"zzzzzz","st":"succeeded"\u0000\u0000\u0000}`,
      line({ id: 'zzzzzz', t: 'x'.repeat(20_000) }), // a huge line
      // The shape the store writes, damaged past its id and state, and the newest line of its run:
      line({ id: 'yyyyyy', st: 'running', p: 'one' }),
      line({ id: 'xxxxxx', usd: -1 }),
    ];
    appendFileSync(index, `${damaged.join('\n')}\n`);
    // Extra fields (a newer version's) are not damage.
    appendFileSync(index, `${line({ id: 'zzzzzz', future: { a: 1 } })}\n`);
    const second = finishedJob(writer);

    const reader = open();
    expect(reader.finished().map((r) => r.id)).toEqual([first.id, 'zzzzzz', second.id]);
    expect(reader.active()).toEqual([]);
    expect(reader.finishedCount).toBe(3);
    expect(reader.damage()).toEqual([
      'index.jsonl: 13 damaged lines skipped (lines 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)',
    ]);
    // Logged once per store, however often it reads, and when more damage comes.
    appendFileSync(index, 'garbage\n');
    reader.refresh();
    expect(reader.damage()[0]).toMatch(/^index.jsonl: 14 damaged lines skipped/);
    finishedJob(writer);
    reader.finished();
    const readerLogs = logged.filter((m) => m.includes('damaged'));
    expect(readerLogs).toHaveLength(1);
    // (Lines of the shape the store writes are checked whole when used: the log names those found so far.)
    expect(readerLogs[0]).toMatch(/index.jsonl: \d+ damaged lines skipped \(lines 3, 4, 5, .*polyspawn doctor/);
  });

  test('a line longer than a read chunk (1 MiB) is skipped whole; the lines after it are read', () => {
    const { open, index } = setup();
    const writer = open();
    finishedJob(writer);
    appendFileSync(index, `${'x'.repeat(3 * 1024 * 1024)}\n`);
    const after = finishedJob(writer);
    const reader = open();
    expect(reader.finished().map((r) => r.id)).toContain(after.id);
    expect(reader.damage()).toEqual(['index.jsonl: 1 damaged line skipped (line 3)']);
  });

  test('a damaged header keeps the history in the base, for readers and for the next compaction', () => {
    const { open, index, base } = setup();
    const writer = open();
    const jobs = Array.from({ length: 5 }, () => finishedJob(writer));
    expect(writer.compact(true)).toBe(true);
    const later = finishedJob(writer);
    const [header, ...rest] = readFileSync(index, 'utf8').split('\n');
    for (const damage of ['\u0000'.repeat(header!.length), header!.slice(0, 12), '{"gen":"one"}']) {
      writeFileSync(index, [damage, ...rest].join('\n'));
      const reader = open();
      expect(reader.finished().map((r) => r.id)).toEqual([...jobs, later].map((j) => j.id));
      expect(reader.finishedCount).toBe(6);
      expect(reader.damage()).toEqual(['index.jsonl: 1 damaged line skipped (line 1)']);
    }
    // A compaction under that header keeps the base's runs (it truncates the base to the header's length).
    const baseBefore = readFileSync(base, 'utf8');
    expect(writer.compact(true)).toBe(true);
    expect(readFileSync(base, 'utf8').startsWith(baseBefore)).toBe(true);
    const reader = open();
    expect(reader.finished().map((r) => r.id)).toEqual([...jobs, later].map((j) => j.id));
    expect(reader.damage()).toEqual([]);
  });

  test('a running line naming a live process without its start time (a cloned store) is no running job', () => {
    const { open, index } = setup();
    mkdirSync(join(index, '..'), { recursive: true });
    // pid 1 is always alive; polyspawn on Linux always writes its process's start (ps) beside it.
    appendFileSync(index, `${line({ id: jobId('p', 1), st: 'running', p: 1, s: '2026-01-01T00:00:00Z' })}\n`);
    const reader = open();
    expect(reader.recoverOrphans().map((r) => r.record.id)).toEqual([jobId('p', 1)]);
    expect(reader.active()).toEqual([]);
  });

  test('a damaged line in the base is skipped and counted with its line number', () => {
    const { open, base } = setup();
    const writer = open();
    const jobs = Array.from({ length: 3 }, () => finishedJob(writer));
    writer.compact(true);
    const lines = readFileSync(base, 'utf8').split('\n');
    lines[1] = lines[1]!.replace('"st":"succeeded"', '"st":"exploded!"');
    writeFileSync(base, lines.join('\n'));
    const reader = open();
    expect(reader.finished().map((r) => r.id)).toEqual([jobs[0]!.id, jobs[2]!.id]);
    expect(reader.damage()).toEqual(['index.base.jsonl: 1 damaged line skipped (line 2)']);
  });
});

describe('a damaged record.json', () => {
  const cases: [string, (path: string, other: string) => void, RegExp][] = [
    ['truncated', (p) => writeFileSync(p, readFileSync(p, 'utf8').slice(0, 40)), /not JSON/],
    ['empty', (p) => writeFileSync(p, ''), /not JSON/],
    ['not a record', (p) => writeFileSync(p, '{"v":1,"id":3}'), /not a run's record/],
    ['another run’s', (p, other) => copyFileSync(other, p), /holds the record of another run/],
    [
      'one whose state is not the index’s (an agent can write its own run folder)',
      (p) => writeFileSync(p, readFileSync(p, 'utf8').replace('"state": "failed"', '"state": "succeeded"')),
      /its state \(succeeded\) is not the index's/,
    ],
    [
      'a link to a file of the user’s',
      (p) => {
        rmSync(p);
        const secret = join(tempDir('user-files'), 'secret');
        writeFileSync(secret, '{"v":1}');
        symlinkSync(secret, p);
      },
      /a symbolic link/,
    ],
    [
      'a FIFO (reading it would block for ever)',
      (p) => {
        rmSync(p);
        execFileSync('mkfifo', [p]);
      },
      /not a regular file/,
    ],
    [
      'a folder',
      (p) => {
        rmSync(p);
        mkdirSync(p);
      },
      /not a regular file/,
    ],
  ];
  for (const [name, damage, why] of cases) {
    test(`${name}: the run reads as the index has it, with an error that says the record is damaged`, () => {
      const { open, stateDir } = setup();
      const writer = open();
      const other = finishedJob(writer);
      const job = finishedJob(writer, 'failed');
      damage(join(stateDir, 'runs', job.id, 'record.json'), join(stateDir, 'runs', other.id, 'record.json'));
      const reader = open();
      const record = reader.get(job.id)!;
      expect(record).toMatchObject({ id: job.id, state: 'failed', backend: 'claude', outcome: { costUsd: 0.5 } });
      expect(record.outcome?.error).toMatch(new RegExp(`the record of agent ${job.id} .* is damaged: `));
      expect(record.outcome?.error).toMatch(why);
      expect(reader.get(other.id)?.outcome?.text).toBe(`answer ${other.id}`);
      expect(reader.finished().map((r) => r.id)).toEqual([other.id, job.id]);
    });
  }

  test('one the index does not know: an error that says the record is damaged, not "no agent"', () => {
    const { open, stateDir } = setup();
    const store = open();
    mkdirSync(join(stateDir, 'runs', 'abcdef'), { recursive: true });
    writeFileSync(join(stateDir, 'runs', 'abcdef', 'record.json'), '{"v":1,"id":"abc');
    expect(() => store.get('abcdef')).toThrow(/the record of agent abcdef .* is damaged: not JSON.*state is not known/);
    expect(store.get('abcdeg')).toBeUndefined();
  });
});

describe("a team's file and an agent's session file", () => {
  test('a link or a FIFO in their place reads as no team, no session, at once', () => {
    const { stateDir } = setup();
    const teams = join(stateDir, 'team-runs');
    const sessions = join(stateDir, 'sessions');
    mkdirSync(teams, { recursive: true });
    mkdirSync(sessions, { recursive: true });
    const secret = join(tempDir('user-files'), 'secret-session');
    writeFileSync(secret, JSON.stringify({ sessionId: 'stolen', backend: 'codex' }));
    symlinkSync(secret, join(sessions, 'linked.json'));
    execFileSync('mkfifo', [join(sessions, 'fifo.json'), join(teams, 'team-abcdef.json')]);
    const agentSessions = new AgentSessions(stateDir, { onStateChange: () => undefined } as unknown as JobTable);
    expect(agentSessions.read('linked')).toBeUndefined();
    expect(agentSessions.read('fifo')).toBeUndefined();
    expect(new TeamFiles(stateDir, new Redactor(), me, false).get('team-abcdef')).toBeUndefined();
  });
});

describe('a link where the store writes', () => {
  test('a link at the temp file record.json is written through is replaced, never followed', () => {
    const { open, stateDir } = setup();
    const store = open();
    const job = finishedJob(store);
    const target = join(tempDir('user-files'), `user-file-${counter}`);
    writeFileSync(target, 'the user’s own file\n');
    const record = join(stateDir, 'runs', job.id, 'record.json');
    symlinkSync(target, `${record}.${process.pid}.tmp`);
    store.save({ ...job, prompt: 'a task' });
    expect(readFileSync(target, 'utf8')).toBe('the user’s own file\n');
    expect(lstatSync(record).isFile()).toBe(true);
    expect(open().get(job.id)?.outcome?.text).toBe(`answer ${job.id}`);
  });
});
