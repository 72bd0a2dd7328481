// The job layer's recorder: every change of a job saved through the store port, a turn's
// changes once, a final state at once, and the job on disk before its child starts.
import { describe, expect, test } from 'vitest';
import { Redactor } from '../../src/lib/redact.js';
import { JobRecorder } from '../../src/jobs/recorder.js';
import { JobTable, type Executor, type JobRecord, type JobStore } from '../../src/jobs/table.js';
import { tempDir } from '../helpers/temp.js';

const request = { backend: 'x', model: 'm', prompt: 'the task', cwd: '/', timeoutS: 60, extra: {} };
const succeeded = { state: 'succeeded', outcome: { ok: true, text: 'done', costSource: 'unknown' } } as const;

/** A store that keeps what it is given: each save as `<id>:<state>`. */
function memoryStore(save: (job: JobRecord) => void = () => undefined) {
  const saves: string[] = [];
  const dir = tempDir('recorder');
  const store: JobStore = {
    dir,
    claimId: () => false,
    save: (job) => {
      save(job);
      saves.push(`${job.id}:${job.state}`);
    },
    promptFile: (job) => ({ path: `${dir}/${job.id}.txt`, text: job.prompt }),
    runDir: (id) => `${dir}/${id}`,
    get: () => undefined,
    finished: () => [],
  };
  return { store, saves };
}

function recordedTable(store: JobStore, execute: Executor, log: (m: string) => void = () => undefined) {
  const recorder = new JobRecorder(store, new Redactor(), log);
  const jobs = new JobTable({ concurrency: 2, execute: recorder.guard(execute), store });
  jobs.onChange((job) => recorder.changed(job));
  return { jobs, recorder };
}

describe('JobRecorder', () => {
  test('a job is saved before its child starts, in the turn it was queued in, and its stdin is the stored prompt', async () => {
    const { store, saves } = memoryStore();
    let savedAtStart: string[] = [];
    let promptFile: { path: string; text: string } | undefined;
    const { jobs } = recordedTable(store, async (_job, control) => {
      savedAtStart = [...saves];
      promptFile = control.promptFile;
      return succeeded;
    });
    // Queued and started in one turn of the event loop: no end-of-turn save has run yet.
    const job = jobs.submit(request);
    expect(savedAtStart).toEqual([`${job.id}:running`]);
    expect(promptFile).toEqual({ path: `${store.dir}/${job.id}.txt`, text: 'the task' });
    await jobs.whenFinished(job.id);
    // The final state at once, before anyone hears the job finished; nothing saved twice.
    expect(saves).toEqual([`${job.id}:running`, `${job.id}:succeeded`]);
  });

  test("a turn's changes are saved once, at its end; flush saves them at once", async () => {
    const { store, saves } = memoryStore();
    let finish = () => {};
    const { jobs, recorder } = recordedTable(
      store,
      (_job, control) =>
        new Promise((resolve) => {
          control.onProcessGroup?.({ pgid: 4242, mark: 'a'.repeat(32) });
          finish = () => resolve(succeeded);
        }),
    );
    const job = jobs.submit(request);
    expect(saves).toEqual([`${job.id}:running`]);
    // The process group became known in the same turn: saved at its end, once.
    await new Promise((r) => setImmediate(r));
    expect(saves).toEqual([`${job.id}:running`, `${job.id}:running`]);
    jobs.reportProgress(job.id, 'halfway');
    jobs.reportProgress(job.id, 'nearly');
    recorder.flush();
    expect(saves).toHaveLength(3);
    await new Promise((r) => setImmediate(r));
    expect(saves).toHaveLength(3);
    finish();
    await jobs.whenFinished(job.id);
    expect(saves.at(-1)).toBe(`${job.id}:succeeded`);
  });

  test('a save that fails is logged once per cause, with the store, and the job still runs', async () => {
    const logs: string[] = [];
    const full = Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    const { store } = memoryStore(() => {
      throw full;
    });
    const { jobs } = recordedTable(
      store,
      async () => succeeded,
      (m) => logs.push(m),
    );
    const first = jobs.submit(request);
    const second = jobs.submit(request);
    expect((await jobs.whenFinished(first.id)).state).toBe('succeeded');
    expect((await jobs.whenFinished(second.id)).state).toBe('succeeded');
    expect(logs).toEqual([
      `could not record job ${first.id} in ${store.dir}: ENOSPC: no space left on device (later failures from the same cause are not logged)`,
    ]);
  });
});
