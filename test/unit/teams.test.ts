// The teams' pure pieces: the spec checks, the shared workspace (the atomic claim, blocked_by,
// the owner's update, the reader's wake-up), and presets read from .polyspawn/teams/<name>.md.
import { mkdtempSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { loadPresets, presetFor } from '../../src/jobs/teams/presets.js';
import { checkTeamOptions, parseMember, teamSpec } from '../../src/jobs/teams/spec.js';
import { TeamWorkspace, WORKSPACE_LIMITS } from '../../src/jobs/teams/workspace.js';
import { JobTable } from '../../src/jobs/table.js';
import type { TeamRecord } from '../../src/jobs/teams/record.js';
import { TeamTable, type TeamStore } from '../../src/jobs/teams/table.js';
import { waitForWork } from '../../src/jobs/teams/wait.js';

const workspace = () => {
  const events: string[] = [];
  return { ws: new TeamWorkspace((kind, text) => events.push(`${kind}: ${text}`)), events };
};

describe('team spec', () => {
  test('options are checked, each refusal naming the option', () => {
    expect(() => checkTeamOptions({ topology: 'ring', members: ['codex'] })).toThrow(/^topology: /);
    expect(() => checkTeamOptions({ topology: 'peer_ring', members: ['codex', 'claude'], rounds: 11 })).toThrow(
      /^rounds: /,
    );
    expect(() => checkTeamOptions({ topology: 'map_reduce', members: ['codex'], colour: 'red' })).toThrow(
      /the options are: topology, members, items/,
    );
    expect(() => checkTeamOptions({ topology: 'map_reduce', members: ['--help'] })).toThrow(/^members\.0: /);
  });

  test('what a topology needs, and options that belong to another', () => {
    const spec = (o: Record<string, unknown>) => teamSpec(checkTeamOptions(o), 'task');
    expect(() => spec({ topology: 'pipeline', members: ['codex'] })).toThrow(/at least two stages/);
    expect(() => spec({ topology: 'peer_ring', members: ['codex'] })).toThrow(/at least two members/);
    expect(() => spec({ topology: 'leader_teammate', members: ['codex'] })).toThrow(/at least one teammate/);
    expect(() => spec({ topology: 'supervisor_tree', members: ['codex', 'claude'] })).toThrow(/exactly one supervisor/);
    expect(() => spec({ topology: 'pipeline', members: ['codex', 'claude'], judge: 'claude' })).toThrow(
      /judge applies to peer_ring only/,
    );
    expect(spec({ topology: 'map_reduce', members: ['codex'], reduce_with: 'claude:opus' })).toMatchObject({
      topology: 'map_reduce',
      reduceWith: 'claude:opus',
      task: 'task',
    });
    expect(parseMember('claude:opus')).toEqual({ name: 'claude', model: 'opus' });
    expect(parseMember('reviewer')).toEqual({ name: 'reviewer' });
  });
});

describe('team workspace', () => {
  test('two members claiming at once: each task goes to exactly one', async () => {
    const { ws } = workspace();
    for (const s of ['a', 'b', 'c']) ws.createTask('lead', s);
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, i) => Promise.resolve().then(() => ws.claim(`m${i % 2}`))),
    );
    const got = claims.filter((t) => t !== undefined).map((t) => t!.id);
    expect(got.sort()).toEqual(['t1', 't2', 't3']);
    expect(claims.filter((t) => t === undefined)).toHaveLength(5);
    expect(() => ws.claim('m1', 't1')).toThrow(/task t1 is claimed by m\d: claim another/);
  });

  test('blocked_by holds a task until its blockers are done; only the owner updates a claimed task', () => {
    const { ws, events } = workspace();
    ws.createTask('lead', 'build');
    ws.createTask('lead', 'test', undefined, ['t1']);
    expect(() => ws.createTask('lead', 'x', undefined, ['t9'])).toThrow(/blocked_by names no task: t9/);
    expect(ws.claim('a')!.id).toBe('t1');
    expect(ws.claim('b')).toBeUndefined(); // t2 waits for t1
    expect(() => ws.claim('b', 't2')).toThrow(/waits for t1/);
    expect(() => ws.update('b', 't1', 'done')).toThrow(/claimed by a: only it updates/);
    ws.update('a', 't1', 'done', 'built');
    expect(ws.claim('b')!.id).toBe('t2');
    expect(events).toContain('task: a marked t1 done: built');
  });

  test('read_messages: unread messages at once; otherwise it waits for the next change, unless it missed one', async () => {
    const { ws } = workspace();
    ws.send('lead', 'hello all');
    ws.send('lead', 'for b only', 'b');
    expect((await ws.read('a', 60_000)).map((m) => m.text)).toEqual(['hello all']);
    expect((await ws.read('b', 60_000)).map((m) => m.text)).toEqual(['hello all', 'for b only']);
    // Nothing new for a: it waits, and a change wakes it long before the minute is up.
    const started = Date.now();
    const waiting = ws.read('a', 60_000);
    setTimeout(() => ws.createTask('lead', 'new work'), 50);
    expect(await waiting).toEqual([]);
    expect(Date.now() - started).toBeLessThan(20_000);
    // A change a reader has not seen (it listed before it): returned at once, without a wait.
    ws.listTasks('a');
    ws.createTask('lead', 'more work');
    const quick = Date.now();
    await ws.read('a', 60_000);
    expect(Date.now() - quick).toBeLessThan(20_000);
  });

  test('the board: author and time kept; writing done is announced', () => {
    const { ws } = workspace();
    const done: string[] = [];
    ws.onDone((e) => done.push(`${e.author}: ${e.value}`));
    ws.boardWrite('m1', 'hypothesis', 'off by one');
    ws.boardWrite('m2', 'hypothesis', 'race');
    expect(ws.boardRead('hypothesis')).toMatchObject([{ author: 'm2', value: 'race' }]);
    ws.boardWrite('m2', 'done', 'the race in flush()');
    expect(done).toEqual(['m2: the race in flush()']);
  });

  test("the length limits are the workspace's, not only its tools' schemas: refused, nothing kept", () => {
    const { ws, events } = workspace();
    const long = 'x'.repeat(WORKSPACE_LIMITS.textChars + 1);
    expect(() => ws.createTask('m1', 's'.repeat(WORKSPACE_LIMITS.subjectChars + 1))).toThrow(
      /^the task's subject holds 301 characters, more than the 300 it may: shorten it/,
    );
    expect(() => ws.createTask('m1', 'ok', long)).toThrow(/^the task's description holds 20001 characters/);
    expect(() => ws.send('m1', long)).toThrow(/^the message holds 20001 characters/);
    expect(() => ws.send('m1', '')).toThrow(/^the message is empty/);
    expect(() => ws.boardWrite('m1', 'k'.repeat(WORKSPACE_LIMITS.keyChars + 1), 'v')).toThrow(/^the board's key holds/);
    expect(() => ws.boardWrite('m1', 'done', long)).toThrow(/^the value of done holds 20001 characters/);
    const task = ws.createTask('m1', 'ok');
    expect(() => ws.update('m1', task.id, 'done', long)).toThrow(/^the task's result holds 20001 characters/);
    expect(ws.listTasks()).toMatchObject([{ id: task.id, status: 'open' }]);
    expect(ws.boardRead()).toEqual([]);
    expect(events).toEqual([`task: m1 created ${task.id}: ok`]);
  });
});

describe('team presets', () => {
  test("a preset sets topology, members and options, and its body is the members' instructions; bad files are reported by name and reason", () => {
    const dir = mkdtempSync(join(tmpdir(), 'polyspawn-presets-'));
    writeFileSync(
      join(dir, 'review.md'),
      '---\ndescription: Three reviewers\ntopology: map_reduce\nmembers: [codex, claude]\nreduce_with: claude\n---\n\nReview for security first.\n',
    );
    writeFileSync(join(dir, 'broken.md'), '---\ntopology: star\nmembers: [codex]\n---\n');
    writeFileSync(join(dir, 'nofront.md'), 'just text\n');
    mkdirSync(join(dir, 'sub'));
    symlinkSync(join(dir, 'review.md'), join(dir, 'linked.md'));
    const { presets, problems } = loadPresets(dir);
    expect(presets.map((p) => p.name)).toEqual(['review']);
    expect(presets[0]).toMatchObject({
      options: { topology: 'map_reduce', members: ['codex', 'claude'], reduce_with: 'claude' },
      instructions: 'Review for security first.',
      description: 'Three reviewers',
    });
    expect(problems.map((p) => `${p.file.slice(dir.length + 1)}: ${p.problem}`)).toEqual([
      expect.stringMatching(/^broken\.md: topology: /),
      'linked.md: it is not a plain file (links are not followed)',
      expect.stringMatching(/^nofront\.md: it does not start with a YAML frontmatter block/),
    ]);
    expect(() => presetFor(dir, 'broken')).toThrow(/team preset "broken" \(.*broken\.md\) cannot be used: topology: /);
    expect(() => presetFor(dir, '../x')).toThrow(/is not a preset name/);
  });
});

describe('waiting for a team', () => {
  test("another server's running team is waited for until the time is up, not polled", async () => {
    const jobs = new JobTable({
      concurrency: 1,
      execute: async () => ({ state: 'succeeded', outcome: { ok: true, text: '', costSource: 'unknown' } }),
    });
    const running: TeamRecord = {
      id: 'team-abcdef',
      spec: { topology: 'map_reduce', task: 't', members: ['codex'] },
      state: 'running',
      createdAt: new Date().toISOString(),
      members: [],
      events: [],
    };
    const store: TeamStore = {
      claimId: () => false,
      save: () => undefined,
      get: () => running,
      recent: () => [running],
    };
    const table = new TeamTable({
      checkMember: () => undefined,
      spawnMember: () => {
        throw new Error('not used');
      },
      jobs,
      store,
      maxTeamDepth: 1,
    });
    let waits = 0;
    const counted = {
      get: (id: string) => table.get(id),
      activeMembers: (ids: string[]) => table.activeMembers(ids),
      waitFor: (id: string, options: { timeoutMs: number; signal?: AbortSignal }) => (
        waits++,
        table.waitFor(id, options)
      ),
    };
    const result = await waitForWork(jobs, counted, [], [running.id], { timeoutMs: 300, mode: 'all' });
    expect(result.teams.map((t) => t.state)).toEqual(['running']);
    expect(waits).toBe(1); // one wait that ran out, not a loop of waits that return at once
  });
});
