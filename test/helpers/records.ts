// A job record as the job table would hand it to the run store, for tests that write the store
// directly: started once it is past queued, ended with an outcome once it is finished.
import type { JobRecord, JobState } from '../../src/jobs/table.js';

export function jobRecord(id: string, state: JobState, overrides: Partial<JobRecord> = {}): JobRecord {
  const now = new Date().toISOString();
  return {
    id,
    backend: 'claude',
    model: 'sonnet',
    prompt: 'a task',
    cwd: '/tmp',
    timeoutS: 60,
    extra: {},
    state,
    createdAt: now,
    ...(state !== 'queued' ? { startedAt: now } : {}),
    ...(state !== 'queued' && state !== 'running'
      ? { endedAt: now, outcome: { ok: state === 'succeeded', text: `answer ${id}`, costSource: 'unknown' as const } }
      : {}),
    ...overrides,
  };
}
