// The run store and the IAC.md writer on a real file system, several "servers" in one process
// (each its own RunStore with its own identity), real processes for recovery.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { jobId } from '../helpers/ids.js';
import { jobRecord } from '../helpers/records.js';
import { processStart, sameProcessAlive, type ProcessIdentity } from '../../src/lib/proc.js';
import { backends } from '../../backends/registry.js';
import { loadConfig } from '../../src/config/config.js';
import { terminateGroup } from '../../src/jobs/process/runner.js';
import { RUN_MARK_ENV } from '../../src/jobs/process/run-processes.js';
import { Redactor } from '../../src/lib/redact.js';
import { createIacRuntime } from '../../iac/runtime.js';
import { RunStore, type StoredRecord } from '../../iac/store.js';
import { IacWriter } from '../../iac/writer.js';
import { JobTable, type Executor, type JobRecord, type JobState } from '../../src/jobs/table.js';
import { parseIac } from '../helpers/iac.js';
import { markedProcesses } from '../helpers/process-groups.js';
import { waitFor, waitGone } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

const project = () => {
  const dir = tempDir('store');
  return { dir, state: join(dir, '.polyspawn'), iac: join(dir, 'IAC.md') };
};
const me: ProcessIdentity = { pid: process.pid, start: processStart(process.pid) ?? 'x' };
const openStore = (state: string, identity = me) =>
  new RunStore({
    stateDir: state,
    redactor: new Redactor(
      ['configured-secret-123'],
      backends.flatMap((b) => b.secretPatterns),
    ),
    identity,
  });

let counter = 0;
function job(state: JobState, overrides: Partial<JobRecord> = {}): JobRecord {
  const id = jobId('j', counter++);
  return jobRecord(id, state, { prompt: `task ${id}\nmore`, ...overrides });
}

/** Saves a job through its three states, as the job table would. */
function run(store: RunStore, final: JobState = 'succeeded', overrides: Partial<JobRecord> = {}): JobRecord {
  const j = job('queued', overrides);
  store.claimId(j.id);
  store.save(j);
  j.state = 'running';
  j.startedAt = new Date().toISOString();
  store.save(j);
  Object.assign(j, {
    state: final,
    endedAt: new Date().toISOString(),
    outcome: { ok: final === 'succeeded', text: `answer ${j.id}`, costSource: 'unknown' },
  });
  store.save(j);
  return j;
}

describe('RunStore', () => {
  test("a record that the run's agent replaced with a link (to a file of the host) is not read through it", () => {
    const p = project();
    const store = openStore(p.state);
    const j = run(store, 'succeeded');
    const hostFile = join(p.dir, 'host-file.json');
    writeFileSync(hostFile, JSON.stringify({ ...store.get(j.id), outcome: { text: 'from-a-host-file' } }));
    const record = join(p.state, 'runs', j.id, 'record.json');
    rmSync(record);
    symlinkSync(hostFile, record);
    const other = openStore(p.state, { pid: 1, start: 'other' });
    expect(JSON.stringify(other.get(j.id) ?? null)).not.toContain('from-a-host-file');
  });

  test('records every change atomically, indexes state changes, and answers get/finished from disk', () => {
    const p = project();
    const store = openStore(p.state);
    const j = run(store, 'succeeded', { prompt: 'use configured-secret-123 and sk-abcdefghijklmnopqrstuvwx please' });
    const stored = store.get(j.id)!;
    expect(stored).toMatchObject({ id: j.id, state: 'succeeded', owner: me, outcome: { text: `answer ${j.id}` } });
    expect(stored.prompt).toBe('use [REDACTED] and [REDACTED] please');
    expect(readFileSync(join(p.state, 'runs', j.id, 'prompt.txt'), 'utf8')).toBe(stored.prompt);
    const lines = readFileSync(join(p.state, 'index.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { st: string });
    expect(lines.map((l) => l.st)).toEqual(['queued', 'running', 'succeeded']);

    const other = openStore(p.state, { pid: 1, start: 'other' });
    expect(other.finished().map((r) => [r.id, r.state])).toEqual([[j.id, 'succeeded']]);
    expect(other.get(j.id)!.outcome!.text).toBe(`answer ${j.id}`);
    expect(other.get('../../etc')).toBeUndefined();
    // No temp files left behind.
    expect(readdirSync(join(p.state, 'runs', j.id)).sort()).toEqual(['prompt.txt', 'record.json']);
  });

  test('claimId: an id is handed out once across stores, and never one already stored', () => {
    const p = project();
    const a = openStore(p.state);
    const b = openStore(p.state, { pid: 1 });
    expect(a.claimId('abc234')).toBe(false);
    expect(a.claimId('abc234')).toBe(true);
    expect(b.claimId('abc234')).toBe(true);
    // The job table asks the hook for every id it draws: ids it hands out are claimed in the store.
    const ids = new Set<string>();
    const table = new JobTable({
      concurrency: 1,
      execute: async () => ({ state: 'succeeded', outcome: { ok: true, text: '', costSource: 'unknown' } }),
      store: b,
    });
    for (let i = 0; i < 200; i++)
      ids.add(table.submit({ backend: 'x', model: 'm', prompt: 'p', cwd: '/', timeoutS: 1, extra: {} }).id);
    expect(ids.size).toBe(200);
    for (const id of ids) expect(a.claimId(id)).toBe(true);
  });

  test('a line torn by a crash is skipped and the line glued to it recovered; a half-written last line waits', () => {
    const p = project();
    const store = openStore(p.state);
    const first = run(store);
    appendFileSync(join(p.state, 'index.jsonl'), '{"id":"trnx23","st":"runn');
    const second = run(store);
    appendFileSync(join(p.state, 'index.jsonl'), '{"id":"hafx23","st":"succeeded","b":"x"');
    const reader = openStore(p.state, { pid: 1 });
    expect(reader.finished().map((r) => r.id)).toEqual([first.id, second.id]);
    expect(reader.line('trnx23')).toBeUndefined();
    appendFileSync(join(p.state, 'index.jsonl'), ',"m":"m","t":"t","c":"2026-01-01T00:00:00Z"}\n');
    expect(reader.finished().map((r) => r.id)).toEqual([first.id, second.id, 'hafx23']);
  });

  test('a second store follows the first by reading only what was appended', () => {
    const p = project();
    const a = openStore(p.state);
    const b = openStore(p.state, { pid: 1 });
    run(a);
    expect(b.finished()).toHaveLength(1);
    const queued = job('queued');
    a.claimId(queued.id);
    a.save(queued);
    b.refresh();
    expect(b.active().map((l) => l.id)).toEqual([queued.id]);
    run(a);
    expect(b.finished()).toHaveLength(2);
  });
});

describe('IacWriter', () => {
  test('a burst of 100 jobs finishing together makes one or two writes, and IAC.md holds them all', async () => {
    const p = project();
    const store = openStore(p.state);
    const writer = new IacWriter(store, { file: p.iac, entries: 200, debounceMs: 50 });
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      ids.push(run(store).id);
      writer.schedule();
    }
    await writer.flush();
    expect(writer.writes).toBeLessThanOrEqual(2);
    const parsed = parseIac(readFileSync(p.iac, 'utf8'));
    expect(parsed.entries.map((e) => e.id)).toEqual(ids.reverse());
  });

  test('jobs finishing over time, in 20 small bursts: a write a debounce window at most, far fewer than jobs', async () => {
    const p = project();
    const store = openStore(p.state);
    const debounceMs = 200;
    // When each write renders its document (and whether the final flush had begun), and when it
    // has written it.
    const rendered: { at: number; flushing: boolean }[] = [];
    const written: number[] = [];
    let flushing = false;
    const writer = new IacWriter(store, {
      file: p.iac,
      entries: 200,
      debounceMs,
      afterWrite: () => written.push(Date.now()),
    });
    const render = writer.render.bind(writer);
    writer.render = (now) => {
      rendered.push({ at: Date.now(), flushing });
      return render(now);
    };
    const started = Date.now();
    for (let burst = 0; burst < 20; burst++) {
      for (let i = 0; i < 5; i++) {
        run(store);
        writer.schedule();
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    const elapsed = Date.now() - started;
    flushing = true;
    await writer.flush();
    // Whatever the machine's speed: a write starts a whole window after the one before it ended
    // (half a window allowed here: a timer can fire a little early); only the flush's may be
    // sooner. So at most one write per window: a write per job, or per burst, would pass only
    // on a machine where the bursts took 50 (or 10) windows.
    expect(rendered).toHaveLength(written.length);
    for (let i = 1; i < rendered.length; i++) {
      const gap = rendered[i]!.at - written[i - 1]!;
      if (!rendered[i]!.flushing)
        expect(gap, `write ${i} began ${gap} ms after the one before`).toBeGreaterThanOrEqual(100);
    }
    expect(writer.writes).toBeLessThanOrEqual(Math.floor(elapsed / (debounceMs / 2)) + 2);
    // And never more than one per burst: each write takes the changes made before it started.
    expect(writer.writes).toBeLessThanOrEqual(20);
    expect(parseIac(readFileSync(p.iac, 'utf8')).entries).toHaveLength(100);
  });

  test('bounded: the newest N entries; a write renders only entries it has not rendered before', async () => {
    const p = project();
    const store = openStore(p.state);
    const writer = new IacWriter(store, { file: p.iac, entries: 10, debounceMs: 0 });
    const all = Array.from({ length: 30 }, () => run(store).id);
    await writer.flush();
    writer.schedule();
    await writer.flush();
    const parsed = parseIac(readFileSync(p.iac, 'utf8'));
    expect(parsed.entries.map((e) => e.id)).toEqual(all.slice(-10).reverse());
    // Entries come from the cache: deleting every record file does not change the next write.
    const before = readFileSync(p.iac, 'utf8').replace(/_Updated[^\n]*/, '');
    for (const id of all) appendFileSync(join(p.state, 'runs', id, 'record.json'), 'garbage');
    writer.schedule();
    await writer.flush();
    expect(readFileSync(p.iac, 'utf8').replace(/_Updated[^\n]*/, '')).toBe(before);
  });

  test("two servers' writers on one project: each document is written whole, under the lock, by one writer at a time, and shows every job finished before it", async () => {
    const p = project();
    const a = openStore(p.state);
    const b = openStore(p.state, { pid: process.ppid, start: processStart(process.ppid) ?? 'p' });
    const lockDir = join(p.state, 'iac.lock'); // proper-lockfile's lock: a directory
    const finished: string[] = []; // every job finished so far, both servers'
    const problems: string[] = [];
    const written: { by: string; ids: string[] }[] = [];
    // The writer between rendering a document and having written it: no other may render or
    // write meanwhile, or a document rendered earlier could replace one that shows more.
    let inside: string | undefined;
    const watched = (name: string, store: RunStore) => {
      let known: string[] = [];
      const writer = new IacWriter(store, {
        file: p.iac,
        entries: 200,
        debounceMs: 5,
        log: (message) => problems.push(`${name} logged: ${message}`),
        afterWrite: (document) => {
          if (inside !== name) problems.push(`${name} wrote while ${inside ?? 'no writer'} held the document`);
          if (!existsSync(lockDir)) problems.push(`${name} wrote without holding the lock`);
          if (readFileSync(p.iac, 'utf8') !== document) problems.push(`${name}: IAC.md is not what it just wrote`);
          try {
            const ids = parseIac(document).entries.map((e) => e.id);
            if ([...ids].sort().join() !== [...known].sort().join())
              problems.push(`${name} wrote ${ids.length} entries, not the ${known.length} jobs finished before it`);
            written.push({ by: name, ids });
          } catch (error) {
            problems.push(`${name} wrote a document that does not parse: ${(error as Error).message}`);
          }
          inside = undefined;
        },
      });
      const render = writer.render.bind(writer);
      writer.render = (now) => {
        if (inside !== undefined) problems.push(`${name} rendered while ${inside} held the document`);
        if (!existsSync(lockDir)) problems.push(`${name} rendered without holding the lock`);
        inside = name;
        known = [...finished];
        return render(now);
      };
      return writer;
    };
    const wa = watched('a', a);
    const wb = watched('b', b);
    for (let round = 0; round < 8; round++) {
      for (let i = 0; i < 5; i++) {
        finished.push(run(i % 2 ? a : b).id);
        (i % 2 ? wa : wb).schedule();
      }
      // Both write at once (without the lock their writes would overlap every time), or each
      // on its own timer, racing.
      if (round % 2 === 0) await Promise.all([wa.flush(), wb.flush()]);
      else await new Promise((r) => setTimeout(r, 10));
    }
    await Promise.all([wa.flush(), wb.flush()]);
    expect(problems).toEqual([]);
    expect(written.filter((w) => w.by === 'a').length).toBeGreaterThanOrEqual(4);
    expect(written.filter((w) => w.by === 'b').length).toBeGreaterThanOrEqual(4);
    expect(existsSync(lockDir)).toBe(false); // released
    const parsed = parseIac(readFileSync(p.iac, 'utf8'));
    expect(new Set(parsed.entries.map((e) => e.id))).toEqual(new Set(finished));
    expect(parsed.entries).toHaveLength(40);
  });
  test('a writer that lost the lock while it stalled (taken over as stale) never replaces the newer document the other wrote', async () => {
    const p = project();
    const a = openStore(p.state);
    const b = openStore(p.state, { pid: process.ppid, start: processStart(process.ppid) ?? 'p' });
    const lockDir = join(p.state, 'iac.lock');
    const documents: { by: string; ids: string[] }[] = [];
    const writer = (name: string, store: RunStore, beforeReplace?: () => Promise<void>) =>
      new IacWriter(store, {
        file: p.iac,
        entries: 200,
        debounceMs: 0,
        staleLockMs: 2000,
        afterWrite: (document) => documents.push({ by: name, ids: parseIac(document).entries.map((e) => e.id) }),
        ...(beforeReplace ? { beforeReplace } : {}),
      });
    const wb = writer('b', b);
    const first = run(a).id;
    let second = '';
    let stalled = false;
    // a has rendered (it knows `first` only) and written its document aside. Meanwhile, as if a's
    // event loop had stalled past the stale age, b finds the lock stale, takes it over, and writes
    // a document with a job finished since.
    const wa = writer('a', a, async () => {
      if (stalled) return;
      stalled = true;
      const past = new Date(Date.now() - 60_000);
      utimesSync(lockDir, past, past);
      second = run(b).id;
      b.refresh();
      wb.schedule();
      await wb.flush();
    });
    wa.schedule();
    await wa.flush();
    expect(stalled).toBe(true);
    expect(documents[0]).toEqual({ by: 'b', ids: [second, first] });
    // Every document written shows every job the one before it showed.
    for (let i = 1; i < documents.length; i++)
      expect(documents[i]!.ids, `document ${i} by ${documents[i]!.by}`).toEqual(
        expect.arrayContaining(documents[i - 1]!.ids),
      );
    expect(new Set(parseIac(readFileSync(p.iac, 'utf8')).entries.map((e) => e.id))).toEqual(new Set([first, second]));
    expect(readdirSync(p.dir).filter((name) => name.startsWith('IAC.md.'))).toEqual([]); // its copy removed
  });
});

describe('an IAC.md polyspawn did not write', () => {
  const FOREIGN = '# Infrastructure as Code notes\n\nOur Terraform conventions.\n';

  test('the writer never overwrites it, and says why once; a file it wrote, or an empty one, it rewrites', async () => {
    const p = project();
    const store = openStore(p.state);
    const logs: string[] = [];
    writeFileSync(p.iac, FOREIGN);
    const writer = new IacWriter(store, { file: p.iac, entries: 10, debounceMs: 0, log: (m) => logs.push(m) });
    for (let i = 0; i < 2; i++) {
      run(store);
      writer.schedule();
      await writer.flush();
    }
    expect(readFileSync(p.iac, 'utf8')).toBe(FOREIGN);
    expect(writer.writes).toBe(0);
    expect(logs).toEqual([
      `not writing ${p.iac}: polyspawn did not write it (it lacks IAC.md's title line and end marker), so it is left as it is`,
    ]);
    // A document it wrote (title line and end marker), or nothing to lose.
    for (const before of [writer.render(Date.now()), '']) {
      writeFileSync(p.iac, before);
      const last = run(store);
      writer.schedule();
      await writer.flush();
      expect(parseIac(readFileSync(p.iac, 'utf8')).entries[0]!.id).toBe(last.id);
    }
  });

  test('the runtime writes IAC.polyspawn.md beside it instead, and says so among its problems', async () => {
    const p = project();
    writeFileSync(p.iac, FOREIGN);
    const config = loadConfig(backends, { XDG_CONFIG_HOME: join(p.dir, 'xdg') }, p.dir);
    const runtime = createIacRuntime(
      { config, secrets: new Redactor(), log: () => true },
      { endGroup: terminateGroup },
    );
    const elsewhere = join(p.dir, 'IAC.polyspawn.md');
    expect(runtime.file).toBe(elsewhere);
    expect(runtime.problems).toEqual([
      `${p.iac} was not written by polyspawn (it lacks IAC.md's title line and end marker), so it is left alone and ` +
        `polyspawn's record of this project's agents is ${elsewhere}. To choose another place, set iac_file in ` +
        'polyspawn.config.json or POLYSPAWN_IAC_FILE.',
    ]);
    const finished = run(runtime.store);
    runtime.record();
    await runtime.close();
    expect(readFileSync(p.iac, 'utf8')).toBe(FOREIGN);
    expect(parseIac(readFileSync(elsewhere, 'utf8')).entries.map((e) => e.id)).toEqual([finished.id]);
  });
});

/** A detached `sleep` with a run's mark, as a job's process left running by a dead server. */
async function markedSleep() {
  const mark = randomBytes(16).toString('hex');
  const sleeper = spawn('sleep', ['1000'], {
    detached: true,
    stdio: 'ignore',
    env: { ...process.env, [RUN_MARK_ENV]: mark },
  });
  const exited = once(sleeper, 'exit');
  await once(sleeper, 'spawn');
  return { mark, process: sleeper, exited };
}

describe('recovery', () => {
  test("the runtime marks a dead server's jobs interrupted and ends their process groups; a live server's are left alone", async () => {
    const p = project();
    // A server that has exited: its pid is gone.
    const dead = spawn(process.execPath, ['-e', '']);
    await once(dead, 'exit');
    const deadStore = openStore(p.state, { pid: dead.pid!, start: 'gone' });
    // A job group still running after its server died (as if the reaper had died too). Spawned
    // by the test, it carries the test's mark: the setup file ends it if the test fails.
    const { mark, process: group, exited } = await markedSleep();
    expect(markedProcesses()).toContain(group.pid);
    const running = job('running', { processGroup: { pgid: group.pid!, mark } });
    deadStore.claimId(running.id);
    deadStore.save(running);
    // A job whose group leader is gone, but a process it started in a session of its own lives
    // on (as Gemini CLI's shells do): found by the run's mark alone.
    const { mark: strayMark, process: stray, exited: strayExited } = await markedSleep();
    const leaderGone = spawn(process.execPath, ['-e', '']);
    await once(leaderGone, 'exit');
    const strayed = job('running', { processGroup: { pgid: leaderGone.pid!, mark: strayMark } });
    deadStore.claimId(strayed.id);
    deadStore.save(strayed);
    const queued = job('queued');
    deadStore.claimId(queued.id);
    deadStore.save(queued);
    const finished = run(deadStore);
    expect(deadStore.get(running.id)!.group).toEqual({ pgid: group.pid, start: processStart(group.pid!), mark });

    // A job of a live server (the test's parent process) and one whose pid was reused.
    const liveStore = openStore(p.state, { pid: process.ppid, start: processStart(process.ppid)! });
    const live = job('running');
    liveStore.claimId(live.id);
    liveStore.save(live);
    const reusedStore = openStore(p.state, { pid: process.ppid, start: 'started-at-another-time' });
    const reused = job('running');
    reusedStore.claimId(reused.id);
    reusedStore.save(reused);

    // The next server's runtime, as src/app.ts builds it: the process runner's terminateGroup.
    const logs: string[] = [];
    const config = loadConfig(backends, { XDG_CONFIG_HOME: join(p.dir, 'xdg'), POLYSPAWN_KILL_GRACE_S: '1' }, p.dir);
    const runtime = createIacRuntime(
      { config, secrets: new Redactor(), log: (m) => logs.push(m) },
      { endGroup: terminateGroup },
    );
    expect(sameProcessAlive(group.pid!, processStart(group.pid!))).toBe(true);
    runtime.start();
    await waitFor("the runtime to recover the dead server's jobs", () => logs.some((l) => l.startsWith('marked ')));
    const recovered = /^marked 4 job\(s\) of ended servers interrupted: (.*)$/.exec(
      logs.find((l) => l.startsWith('marked '))!,
    );
    expect(recovered?.[1]!.split(', ').sort()).toEqual([running.id, strayed.id, queued.id, reused.id].sort());
    // It ends the group by itself: SIGTERM first (sleep dies of it), and the stray by its mark.
    await waitGone(group.pid!, 20_000);
    expect((await exited)[1]).toBe('SIGTERM');
    await waitGone(stray.pid!, 20_000);
    expect((await strayExited)[1]).toBe('SIGTERM');
    const g = runtime.store.get(running.id)!.group!;
    expect(sameProcessAlive(g.pgid, g.start)).toBe(false);
    await runtime.close();

    const next = runtime.store;
    for (const id of [running.id, strayed.id, queued.id, reused.id]) {
      const r = next.get(id) as StoredRecord;
      expect(r.state).toBe('interrupted');
      expect(r.outcome!.error).toMatch(
        /interrupted: the polyspawn server that ran it \(pid \d+\) ended before it finished/,
      );
    }
    expect(next.get(live.id)!.state).toBe('running');
    expect(next.get(finished.id)!.state).toBe('succeeded');
    const parsed = parseIac(readFileSync(p.iac, 'utf8'));
    expect(parsed.active.map((row) => row[0])).toEqual([live.id]);
    expect(parsed.entries.map((e) => e.id).sort()).toEqual(
      [finished.id, running.id, strayed.id, queued.id, reused.id].sort(),
    );

    // A second recovery finds nothing more to do.
    expect(next.recoverOrphans()).toEqual([]);
  });
});

describe('JobTable over the store', () => {
  test('stored jobs answer get, all, waitFor and cancel as they are; a wait is woken when the new job finishes', async () => {
    const p = project();
    const earlier = openStore(p.state, { pid: 1, start: 'old' });
    const done = run(earlier);
    const store = openStore(p.state);
    let finish = () => {};
    const gate = new Promise<void>((r) => (finish = r));
    const execute: Executor = async () => {
      await gate;
      return { state: 'succeeded', outcome: { ok: true, text: 'new', costSource: 'unknown' } };
    };
    const table = new JobTable({ concurrency: 2, execute, store });
    expect(table.get(done.id)).toMatchObject({
      id: done.id,
      state: 'succeeded',
      outcome: { text: `answer ${done.id}` },
    });
    const fresh = table.submit({ backend: 'x', model: 'm', prompt: 'p', cwd: '/', timeoutS: 1, extra: {} });
    expect(table.all().map((r) => r.id)).toEqual([done.id, fresh.id]);
    // The new job finishes only once the wait has begun: the wait must be woken by it, long
    // before its 60 s run out.
    const started = Date.now();
    const waiting = table.waitFor([done.id, fresh.id], { timeoutMs: 60_000, mode: 'all' });
    expect(table.get(fresh.id)!.state).toBe('running');
    finish();
    const waited = await waiting;
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(waited.pending).toEqual([]);
    expect(waited.finished.map((r) => r.id).sort()).toEqual([done.id, fresh.id].sort());
    expect((await table.cancel(done.id))!.state).toBe('succeeded');
  }, 90_000);
});
