// Session agents over the job table: turns one at a time, each resuming the session the turn
// before it left, kept in a file that outlives the table.
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { AgentSessions, whenFinished } from '../../src/jobs/agents/sessions.js';
import { JobTable, type Executor, type JobRecord, type JobRequest } from '../../src/jobs/table.js';
import { tempDir } from '../helpers/temp.js';

function setup(stateDir = tempDir('sessions')) {
  const started: JobRecord[] = [];
  const running = new Set<string>();
  let overlap = false;
  const gates = new Map<string, () => void>();
  const execute: Executor = async (job) => {
    started.push({ ...job });
    if (running.size > 0) overlap = true;
    running.add(job.id);
    await new Promise<void>((r) => gates.set(job.prompt, r));
    running.delete(job.id);
    const sessionId = job.resumeSessionId ?? `session-of-${job.prompt}`;
    return {
      state: 'succeeded',
      outcome: {
        ok: true,
        text: job.prompt,
        sessionId,
        sessionTotals: { inputTokens: started.length * 10, outputTokens: 1, cachedInputTokens: 0 },
        costSource: 'unknown',
      },
    };
  };
  const jobs = new JobTable({ concurrency: 4, execute });
  const sessions = new AgentSessions(stateDir, jobs);
  const request = (prompt: string): JobRequest & { agent: { name: string } } => ({
    backend: 'claude',
    model: 'sonnet',
    prompt,
    cwd: '/',
    timeoutS: 60,
    extra: {},
    agent: { name: 'chat', session: true },
  });
  const release = async (prompt: string) => {
    for (let i = 0; i < 200 && !gates.has(prompt); i++) await new Promise((r) => setTimeout(r, 5));
    gates.get(prompt)!();
  };
  return { stateDir, jobs, sessions, request, release, started, overlap: () => overlap };
}

describe('session turns', () => {
  test('run one after the other, each resuming the session; the file outlives the table', async () => {
    const t = setup();
    const a = t.sessions.submit(t.request('one'), false);
    const b = t.sessions.submit(t.request('two'), false);
    const c = t.sessions.submit(t.request('three'), false);
    expect([a.state, b.state, c.state]).toEqual(['running', 'queued', 'queued']);
    // Waiting turns are outside the concurrency limit: another job runs meanwhile.
    expect(t.jobs.counts.queued).toBe(0);
    await t.release('one');
    await t.release('two');
    await t.release('three');
    await whenFinished(t.jobs, c.id);
    expect(t.overlap()).toBe(false);
    expect(t.started.map((j) => j.resumeSessionId)).toEqual([undefined, 'session-of-one', 'session-of-one']);
    expect(t.started[2]!.previousSessionTotals).toEqual({ inputTokens: 20, outputTokens: 1, cachedInputTokens: 0 });

    const again = setup(t.stateDir); // a new server on the same store
    expect(again.sessions.read('chat')).toMatchObject({
      backend: 'claude',
      sessionId: 'session-of-one',
      lastJobId: c.id,
    });
    const d = again.sessions.submit(again.request('four'), false);
    await again.release('four');
    await whenFinished(again.jobs, d.id);
    expect(again.started[0]!.resumeSessionId).toBe('session-of-one');

    const fresh = again.sessions.submit(again.request('five'), true);
    await again.release('five');
    await whenFinished(again.jobs, fresh.id);
    expect(again.started[1]!.resumeSessionId).toBeUndefined();
    expect(again.sessions.read('chat')!.sessionId).toBe('session-of-five');
  });

  test('a turn cancelled while it waits lets the next one go', async () => {
    const t = setup();
    const a = t.sessions.submit(t.request('first'), false);
    const b = t.sessions.submit(t.request('second'), false);
    const c = t.sessions.submit(t.request('third'), false);
    expect((await t.jobs.cancel(b.id))!.state).toBe('cancelled');
    await t.release('first');
    await t.release('third');
    await whenFinished(t.jobs, c.id);
    expect(t.jobs.get(a.id)!.state).toBe('succeeded');
    expect(t.started.map((j) => j.prompt)).toEqual(['first', 'third']);
    expect(t.started[1]!.resumeSessionId).toBe('session-of-first');
  });
});
