// Jobs persist: a new server on the same project answers for the jobs of the one before it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { parseIac } from '../helpers/iac.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';
import type { Job } from '../helpers/jobs.js';

type Page = { text: string; size: number; offset: number; next_offset: number; eof: boolean; path: string };

const projectDir = tempDir('restart');
const servers: TestServer[] = [];
const start = async () => {
  const s = await startServer({ projectDir, env: { POLYSPAWN_CONCURRENCY: '4' } });
  servers.push(s);
  return s;
};
afterAll(async () => {
  for (const s of servers) await s.close().catch(() => undefined);
});

describe('after a restart', () => {
  const before: Record<string, Job> = {};
  const named: Record<string, string> = {};

  test('the first server runs jobs that succeed, fail, time out, are cancelled, and one that floods its log', async () => {
    const s = await start();
    const ok = await s.callOk<Job>('spawn_claude', { prompt: 'restart: answer me' });
    const failed = await s.callOk<Job>('spawn_codex', { prompt: 'restart: fail [[cli:fail]]' });
    const slow = await s.callOk<Job>('spawn_copilot', { prompt: 'restart: slow [[cli:hang]]', timeout_s: 1 });
    const flood = await s.callOk<Job>('spawn_codex', { prompt: 'restart: flood [[cli:flood:2]]' });
    const cancelled = await s.callOk<Job>('spawn_claude', { prompt: 'restart: cancel me [[cli:hang]]' });
    Object.assign(named, { ok: ok.agent_id, flood: flood.agent_id });
    await s.callOk('cancel', { agent_id: cancelled.agent_id });
    const waited = await s.callOk<{ finished: Job[] }>('wait_for_agents', {
      agent_ids: [ok.agent_id, failed.agent_id, slow.agent_id, flood.agent_id],
      timeout_s: 30,
    });
    for (const j of waited.finished)
      before[j.agent_id] = await s.callOk<Job>('result', { agent_id: j.agent_id, include_raw: true });
    before[cancelled.agent_id] = await s.callOk<Job>('result', { agent_id: cancelled.agent_id });
    expect(
      Object.values(before)
        .map((j) => j.state)
        .sort(),
    ).toEqual(['cancelled', 'failed', 'succeeded', 'succeeded', 'timed_out']);
    await s.close();
  });

  test('a new server answers result, list, wait_for_agents and logs for them, and resumes their sessions', async () => {
    const s = await start();
    for (const [id, job] of Object.entries(before)) {
      const again = await s.callOk<Job>('result', { agent_id: id, include_raw: job.raw !== undefined });
      expect(again).toEqual({ ...job, elapsed_s: again['elapsed_s' as keyof Job] });
    }
    const listed = await s.callOk<{ agents: Job[] }>('list', { recent: 50 });
    expect(listed.agents.map((a) => a.agent_id).sort()).toEqual(Object.keys(before).sort());
    const waited = await s.callOk<{ finished: Job[]; pending: Job[] }>('wait_for_agents', {
      agent_ids: Object.keys(before),
      timeout_s: 5,
    });
    expect(waited.pending).toEqual([]);
    expect(waited.finished.map((j) => j.agent_id).sort()).toEqual(Object.keys(before).sort());

    // The flooded log, read back a page at a time, is the file.
    const flood = before[named.flood!]!;
    const file = readFileSync(flood.log!);
    let offset = 0;
    const pieces: string[] = [];
    for (;;) {
      const page = await s.callOk<Page>('logs', { agent_id: flood.agent_id, offset, limit: 256 * 1024 });
      expect(page.size).toBe(file.length);
      expect(page.offset).toBe(offset);
      expect(Buffer.byteLength(page.text)).toBeLessThanOrEqual(256 * 1024);
      pieces.push(page.text);
      offset = page.next_offset;
      if (page.eof) break;
    }
    expect(pieces.length).toBeGreaterThan(8);
    expect(pieces.join('')).toBe(file.toString('utf8'));
    const tail = await s.callOk<Page>('logs', { agent_id: flood.agent_id, tail: 300 });
    expect(file.toString('utf8').endsWith(tail.text)).toBe(true);
    expect(tail.text).toContain('turn.completed');
    const stderr = await s.callOk<Page & { stream: string }>('logs', { agent_id: flood.agent_id, stream: 'stderr' });
    expect(stderr).toMatchObject({ stream: 'stderr', offset: 0 });
    const bad = await s.call('logs', { agent_id: flood.agent_id, offset: 0, tail: 10 });
    expect(bad.isError).toBe(true);

    // resume: an agent_id of the earlier server continues its session.
    const ok = before[named.ok!]!;
    const resumed = await s.callOk<Job>('spawn_claude', {
      prompt: 'restart: and again',
      resume: ok.agent_id,
      wait_s: 30,
    });
    expect(resumed.session_id).toBe(ok.session_id);
    expect(Object.keys(before)).not.toContain(resumed.agent_id);
    await s.close();

    const parsed = parseIac(readFileSync(join(projectDir, 'IAC.md'), 'utf8'));
    expect(parsed.entries.map((e) => e.id).sort()).toEqual([...Object.keys(before), resumed.agent_id].sort());
  });

  test('IAC.md is rewritten from the store when it is missing', async () => {
    const { rmSync } = await import('node:fs');
    rmSync(join(projectDir, 'IAC.md'));
    const s = await start();
    await waitFor('IAC.md to be written again', () => {
      try {
        return parseIac(readFileSync(join(projectDir, 'IAC.md'), 'utf8')).entries.length === 6;
      } catch {
        return false;
      }
    });
    await s.close();
  });
});
