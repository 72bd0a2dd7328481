// The teams' pure pieces: the spec checks, what members share (the task list's atomic claim,
// blocked_by, the owner's update, the reader's wake-up; the board), and presets read from
// .polyspawn/teams/<name>.md.
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test, vi } from 'vitest';
import { loadPresets, presetFor } from '../../src/jobs/teams/presets.js';
import { z } from 'zod';
import {
  checkTeamOptions,
  ownOptions,
  teamSpec,
  TOPOLOGY_NAMES,
  type TeamOptions,
} from '../../src/jobs/teams/options.js';
import { topologies } from '../../src/jobs/teams/topologies/registry.js';
import { parseMember, type TeamSpec } from '../../src/jobs/teams/spec.js';
import { TaskList, TASK_LIST_LIMITS } from '../../src/jobs/teams/topologies/task-list.js';
import { Board, BOARD_LIMITS } from '../../src/jobs/teams/topologies/blackboard.js';
import { JobTable } from '../../src/jobs/table.js';
import type { TeamRecord } from '../../src/jobs/teams/record.js';
import { TeamTable, type MemberRequest, type TeamStore } from '../../src/jobs/teams/table.js';
import { waitForWork } from '../../src/jobs/wait.js';
import { tempDir } from '../helpers/temp.js';

/** A leader_teammate team's task list and a blackboard team's board, reporting into one list of events. */
const workspace = () => {
  const events: string[] = [];
  const report = (kind: string, text: string) => void events.push(`${kind}: ${text}`);
  return { ws: new TaskList(report), board: new Board(report), events };
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

describe('the topologies, as the registry declares them', () => {
  test("each topology's options are its own: another topology given one is told which take it", () => {
    for (const topology of topologies)
      for (const option of Object.keys(topology.options ?? {})) {
        const takers = topologies.filter((t) => option in (t.options ?? {})).map((t) => t.name);
        const other = topologies.find((t) => !takers.includes(t.name));
        if (!other) continue;
        // Members the other topology takes, so that the option is what it refuses.
        const members = [1, 2, 3]
          .map((n) => Array.from({ length: n }, () => 'codex'))
          .find((m) => !other.refuse?.({ topology: other.name, task: 'task', members: m }))!;
        const options = { topology: other.name, members, [option]: 'any value' } as TeamOptions;
        const refusal = () => teamSpec(options, 'task');
        expect(refusal).toThrow(`${option} applies to ${takers.join(' and ')} only`);
      }
    expect(TOPOLOGY_NAMES).toEqual(topologies.map((t) => t.name));
  });

  test('two topologies may share an option only as one schema', () => {
    const rounds = z.number();
    const declaring = (name: string, schema: z.ZodType) => ({
      name,
      description: '',
      options: { rounds: schema },
      plannedAgents: () => 1,
      run: async () => ({ ok: true, answer: '' }),
    });
    expect(Object.keys(ownOptions([declaring('a', rounds), declaring('b', rounds)]))).toEqual(['rounds']);
    expect(() => ownOptions([declaring('a', rounds), declaring('b', z.number())])).toThrow(
      /topology b declares option rounds, which a declared with another schema: share one schema/,
    );
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
    const { board } = workspace();
    const done: string[] = [];
    board.onDone((e) => done.push(`${e.author}: ${e.value}`));
    board.write('m1', 'hypothesis', 'off by one');
    board.write('m2', 'hypothesis', 'race');
    expect(board.read('hypothesis')).toMatchObject([{ author: 'm2', value: 'race' }]);
    board.write('m2', 'done', 'the race in flush()');
    expect(done).toEqual(['m2: the race in flush()']);
  });

  test("the length limits are the workspace's, not only its tools' schemas: refused, nothing kept", () => {
    const { ws, board, events } = workspace();
    const long = 'x'.repeat(TASK_LIST_LIMITS.textChars + 1);
    expect(() => ws.createTask('m1', 's'.repeat(TASK_LIST_LIMITS.subjectChars + 1))).toThrow(
      /^the task's subject holds 301 characters, more than the 300 it may: shorten it/,
    );
    expect(() => ws.createTask('m1', 'ok', long)).toThrow(/^the task's description holds 20001 characters/);
    expect(() => ws.send('m1', long)).toThrow(/^the message holds 20001 characters/);
    expect(() => ws.send('m1', '')).toThrow(/^the message is empty/);
    expect(() => board.write('m1', 'k'.repeat(BOARD_LIMITS.keyChars + 1), 'v')).toThrow(/^the board's key holds/);
    expect(() => board.write('m1', 'done', long)).toThrow(/^the value of done holds 20001 characters/);
    const task = ws.createTask('m1', 'ok');
    expect(() => ws.update('m1', task.id, 'done', long)).toThrow(/^the task's result holds 20001 characters/);
    expect(ws.listTasks()).toMatchObject([{ id: task.id, status: 'open' }]);
    expect(board.read()).toEqual([]);
    expect(events).toEqual([`task: m1 created ${task.id}: ok`]);
  });
});

describe('team presets', () => {
  test("a preset sets topology, members and options, and its body is the members' instructions; bad files are reported by name and reason", () => {
    const dir = tempDir('presets');
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
      maxAgents: 50,
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

/**
 * A team table over a real job table whose executor answers at once with `costUsd` a member, or
 * holds a member whose prompt says [hold] until released (or cancelled). A member named
 * `capped` carries its own max_budget_usd of $5 (a named agent's ceiling).
 */
function teamHarness(options: { concurrency?: number; costUsd?: number; maxAgents?: number } = {}) {
  const held = new Map<string, () => void>();
  const ran: string[] = [];
  const jobs = new JobTable({
    concurrency: options.concurrency ?? 1,
    execute: (job, { signal }) =>
      new Promise((resolve) => {
        ran.push(job.id);
        const answer = () =>
          resolve({
            state: 'succeeded',
            outcome: {
              ok: true,
              text: `answer of ${job.team?.role}`,
              costUsd: options.costUsd ?? 2.25,
              costSource: 'reported',
            },
          });
        // [done]: the member writes the board's done key (blackboard), then answers.
        if (job.prompt.includes('[done]'))
          return void setImmediate(() => {
            (table.teamOf(job.id)?.state as Board).write(job.id, 'done', `by ${job.team?.role} ${job.id}`);
            setImmediate(answer);
          });
        if (!job.prompt.includes('[hold]')) return void setImmediate(answer);
        held.set(job.id, answer);
        signal.addEventListener('abort', () =>
          resolve({ state: 'cancelled', outcome: { ok: false, text: '', costSource: 'unknown' } }),
        );
      }),
  });
  const requests: MemberRequest[] = [];
  const table = new TeamTable({
    checkMember: () => undefined,
    spawnMember: (member, request) => {
      requests.push(request);
      return jobs.submit({
        backend: member,
        model: 'm',
        prompt: request.prompt,
        cwd: tmpdir(),
        timeoutS: request.timeoutS ?? 60,
        extra: {},
        team: request.team,
        ...(member === 'capped' ? { maxBudgetUsd: 5 } : {}),
        ...(request.supervisor?.sandbox ? { sandbox: request.supervisor.sandbox } : {}),
      });
    },
    jobs,
    maxTeamDepth: 1,
    maxAgents: options.maxAgents ?? 50,
  });
  const finished = (id: string) => table.waitFor(id, { timeoutMs: 20_000 });
  return { jobs, table, held, ran, requests, finished };
}
const spec = (topology: TeamSpec['topology'], members: string[], extra: Partial<TeamSpec> = {}): TeamSpec => ({
  topology,
  members,
  task: 'the task',
  ...extra,
});

describe('starting a team', () => {
  test('a member an option names (reduce_with, judge) is checked before anything starts', () => {
    const spawned: string[] = [];
    const table = new TeamTable({
      checkMember: (member) => {
        if (member === 'nobody') throw new Error('nobody is no member');
      },
      spawnMember: (member) => {
        spawned.push(member);
        throw new Error('not used');
      },
      jobs: new JobTable({
        concurrency: 1,
        execute: async () => ({ state: 'failed', outcome: { ok: false, text: '', costSource: 'unknown' } }),
      }),
      maxTeamDepth: 1,
      maxAgents: 50,
    });
    expect(() => table.start(spec('map_reduce', ['codex'], { reduceWith: 'nobody' }))).toThrow('nobody is no member');
    expect(() => table.start(spec('peer_ring', ['codex', 'claude'], { judge: 'nobody' }))).toThrow(
      'nobody is no member',
    );
    expect(spawned).toEqual([]);
  });
});

describe("a team's budget", () => {
  test('map_reduce of 8 items at concurrency 1: once the budget is spent no queued member starts, and the answer so far is kept', async () => {
    const { table, ran, finished } = teamHarness({ concurrency: 1 });
    const items = Array.from({ length: 8 }, (_, i) => `item ${i + 1}`);
    const team = await finished(
      table.start(spec('map_reduce', ['codex'], { items, maxBudgetUsd: 1, reduceWith: 'codex' })).id,
    );
    expect(ran).toHaveLength(1); // $2.25 spent by the first: none of the other seven started
    expect(team.budgetReached).toBe(true);
    expect(team.state).toBe('failed');
    expect(team.members.map((m) => m.state)).toEqual(['succeeded', ...Array(7).fill('cancelled')]);
    expect(team.error).toMatch(/^budget reached: its members spent \$2\.2500 of max_budget_usd \$1/);
    expect(team.answer).toContain('answer of item 1');
  });

  test("the members' costs are added up: three members each well under the budget reach it together", async () => {
    const { table, ran, finished } = teamHarness({ concurrency: 1, costUsd: 0.4 });
    const items = Array.from({ length: 5 }, (_, i) => `item ${i + 1}`);
    const team = await finished(
      table.start(spec('map_reduce', ['codex'], { items, maxBudgetUsd: 1, reduceWith: 'codex' })).id,
    );
    expect(ran).toHaveLength(3); // $0.40, $0.80, then $1.20: past $1, so the fourth never starts
    expect(team.budgetReached).toBe(true);
    expect(team.error).toMatch(/^budget reached: its members spent \$1\.2000 of max_budget_usd \$1/);
  });

  test('a pipeline stopped by its budget returns the stages that answered', async () => {
    const { table, ran, finished } = teamHarness();
    const team = await finished(table.start(spec('pipeline', ['codex', 'codex', 'codex'], { maxBudgetUsd: 1 })).id);
    expect(ran).toHaveLength(1);
    expect(team.budgetReached).toBe(true);
    expect(team.error).toMatch(/so no new member was started \(stage 2: codex was next\)/);
    expect(team.answer).toBe('answer of stage 1');
  });

  test("a running member counts at its own max_budget_usd: one that may spend the team's budget leaves none for a second", async () => {
    const { table, ran, held, finished } = teamHarness({ concurrency: 2 });
    const started = table.start(spec('map_reduce', ['capped', 'codex'], { maxBudgetUsd: 1, task: '[hold]' }));
    await vi.waitFor(() => expect(held.size).toBe(1));
    held.values().next().value!();
    const team = await finished(started.id);
    // The second was never started, and the first ran to its end: its answer is the team's so far.
    expect(ran).toHaveLength(1);
    expect(team.members.map((m) => m.state)).toEqual(['succeeded']);
    expect(team.answer).toContain('answer of member 1');
    expect(team.events.find((e) => e.kind === 'budget')!.text).toMatch(
      /its members spent \$0\.0000 and its running members may spend \$5\.0000 more \(their own max_budget_usd\) of max_budget_usd \$1/,
    );
  });
});

describe("a team's budget, where the job table starts a member", () => {
  test('a member queued behind the concurrency limit is checked when the queue starts it, not only when submitted', async () => {
    const { jobs, table, held, ran, finished } = teamHarness({ concurrency: 2 });
    // Two jobs of no team hold both places: the team's members wait in the queue.
    const hogs = [1, 2].map((i) =>
      jobs.submit({ backend: 'x', model: 'm', prompt: `[hold] hog ${i}`, cwd: tmpdir(), timeoutS: 60, extra: {} }),
    );
    const team = table.start(spec('map_reduce', ['capped', 'codex'], { maxBudgetUsd: 1, task: '[hold]' }));
    expect(team.members.map((m) => m.state)).toEqual(['queued', 'queued']);
    held.get(hogs[0]!.id)!(); // capped starts: it may spend $5 of the team's $1
    await vi.waitFor(() => expect(team.members[0]!.state).toBe('running'));
    held.get(hogs[1]!.id)!(); // a place is free, but no member of the team ended
    await vi.waitFor(() => expect(team.members[1]!.state).toBe('cancelled'));
    expect(jobs.get(team.members[1]!.jobId)!.outcome!.error).toMatch(
      /^not started: budget reached: its members spent \$0\.0000 and its running members may spend \$5\.0000 more/,
    );
    expect(ran).toHaveLength(3); // the hogs and capped
    held.get(team.members[0]!.jobId)!();
    expect((await finished(team.id)).budgetReached).toBe(true);
  });
});

describe('blackboard', () => {
  test('the first member to write done gives the answer; a second writer does not replace it', async () => {
    const { table, finished } = teamHarness({ concurrency: 2 });
    const team = await finished(table.start(spec('blackboard', ['codex', 'claude'], { task: '[done]' })).id);
    expect(team.state).toBe('succeeded');
    expect(team.answer).toBe(`by member 1 ${team.members[0]!.jobId}`);
  });
});

describe("a supervisor's child team", () => {
  /** A supervisor_tree team whose supervisor holds, and that supervisor's job id. */
  async function supervised(h: ReturnType<typeof teamHarness>, extra: Partial<TeamSpec> = {}) {
    const parent = h.table.start(spec('supervisor_tree', ['claude'], { task: '[hold]', ...extra }));
    await vi.waitFor(() => expect(parent.members[0]?.state).toBe('running'));
    return { parent, supervisor: parent.members[0]!.jobId };
  }

  test('inherits the budget, max_turns, timeout and isolation, may narrow them, never widen', async () => {
    const h = teamHarness({ concurrency: 4 });
    const limits = { maxBudgetUsd: 3, maxTurns: 5, timeoutS: 600, isolation: 'worktree' as const };
    const { parent, supervisor } = await supervised(h, limits);
    const under = { teamId: parent.id, jobId: supervisor };
    const child = h.table.start(spec('map_reduce', ['codex'], { parent: under, task: '[hold]' }));
    expect(child.spec).toMatchObject(limits);
    const narrower = h.table.start(spec('map_reduce', ['codex'], { parent: under, maxTurns: 2, task: '[hold]' }));
    expect(narrower.spec.maxTurns).toBe(2);
    expect(() => h.table.start(spec('map_reduce', ['codex'], { parent: under, maxBudgetUsd: 6.75 }))).toThrow(
      /max_budget_usd 6\.75 is over the max_budget_usd of the team that runs you \(3\)/,
    );
    expect(() => h.table.start(spec('map_reduce', ['codex'], { parent: under, isolation: 'none' }))).toThrow(
      /works in worktrees, so yours does too/,
    );
    expect(() => h.table.start(spec('map_reduce', ['codex'], { parent: under, timeoutS: 601 }))).toThrow(/timeout_s/);
    await vi.waitFor(() => expect(h.requests).toHaveLength(3));
    expect(h.requests.slice(1).every((r) => r.isolation === 'worktree' && r.timeoutS === 600)).toBe(true);
    await h.table.cancel(parent.id);
  });

  test("draws from its parent's budget: the tree's spending stops the child", async () => {
    const h = teamHarness({ concurrency: 2 });
    const { parent, supervisor } = await supervised(h, { maxBudgetUsd: 1 });
    const items = ['a', 'b', 'c'];
    const child = await h.finished(
      h.table.start(spec('map_reduce', ['codex'], { parent: { teamId: parent.id, jobId: supervisor }, items })).id,
    );
    // One slot is the supervisor's: the child's items ran one at a time, and the first spent the parent's $1.
    expect(child.members.map((m) => m.state)).toEqual(['succeeded', 'cancelled', 'cancelled']);
    expect(child.budgetReached).toBe(true);
    expect(child.error).toMatch(new RegExp(`^budget reached: its members spent \\$2\\.2500 of max_budget_usd \\$1`));
    await h.table.cancel(parent.id);
  });

  test("a sibling's spending counts too: the parent's budget is its whole tree's, not each child's", async () => {
    const h = teamHarness({ concurrency: 2 });
    const { parent, supervisor } = await supervised(h, { maxBudgetUsd: 3 });
    const under = { teamId: parent.id, jobId: supervisor };
    const first = await h.finished(h.table.start(spec('map_reduce', ['codex'], { parent: under, items: ['x'] })).id);
    expect(first.state).toBe('succeeded'); // $2.25 of the $3
    const second = await h.finished(
      h.table.start(spec('map_reduce', ['codex'], { parent: under, items: ['a', 'b', 'c'] })).id,
    );
    // Its own $2.25 is within the $3 it inherited; with its sibling's, the tree is at $4.50.
    expect(second.members.map((m) => m.state)).toEqual(['succeeded', 'cancelled', 'cancelled']);
    expect(second.error).toMatch(
      new RegExp(
        `^budget reached: the members of team ${parent.id} and of the teams below it spent \\$4\\.5000 of team ${parent.id}'s max_budget_usd \\$3`,
      ),
    );
    await h.table.cancel(parent.id);
  });

  test('ending a team ends its whole tree: the supervisor ending, and a cancel', async () => {
    const h = teamHarness({ concurrency: 4 });
    const first = await supervised(h);
    const child = h.table.start(
      spec('map_reduce', ['codex'], { parent: { teamId: first.parent.id, jobId: first.supervisor }, task: '[hold]' }),
    );
    await vi.waitFor(() => expect(child.members[0]?.state).toBe('running'));
    h.held.get(first.supervisor)!(); // the supervisor answers (or times out) with its child still running
    await h.finished(first.parent.id);
    expect(child.state).toBe('cancelled');
    expect(h.jobs.get(child.members[0]!.jobId)!.state).toBe('cancelled');

    const second = await supervised(h);
    const other = h.table.start(
      spec('map_reduce', ['codex'], { parent: { teamId: second.parent.id, jobId: second.supervisor }, task: '[hold]' }),
    );
    await h.table.cancel(second.parent.id);
    expect(other.state).toBe('cancelled');
    expect(() =>
      h.table.start(spec('map_reduce', ['codex'], { parent: { teamId: second.parent.id, jobId: second.supervisor } })),
    ).toThrow(/has ended/);
  });

  test('a tree starts at most maxAgents agents: planned shapes are refused up front, children counted', async () => {
    const h = teamHarness({ concurrency: 4, maxAgents: 10 });
    expect(() => h.table.start(spec('peer_ring', ['codex', 'claude', 'copilot'], { rounds: 4 }))).toThrow(
      /would start 12 agent\(s\), past the 10 a team may start in all, the teams below it included \(team_max_agents/,
    );
    const { parent, supervisor } = await supervised(h);
    const under = { teamId: parent.id, jobId: supervisor };
    const items = Array.from({ length: 9 }, (_, i) => `item ${i}`);
    h.table.start(spec('map_reduce', ['codex'], { parent: under, items, task: '[hold]' }));
    expect(() => h.table.start(spec('map_reduce', ['codex'], { parent: under }))).toThrow(
      /would start 1 agent\(s\) where its tree has started 10, past the 10/,
    );
    await h.table.cancel(parent.id);
  });

  test("a child's members run in the supervisor's sandbox", async () => {
    const h = teamHarness({ concurrency: 4 });
    const { parent, supervisor } = await supervised(h);
    const sandboxed = h.jobs.get(supervisor)!;
    sandboxed.sandbox = { mode: 'bwrap', network: true, mounts: [] };
    h.table.start(spec('map_reduce', ['codex'], { parent: { teamId: parent.id, jobId: supervisor }, task: '[hold]' }));
    expect(h.requests.at(-1)!.supervisor!.sandbox).toEqual(sandboxed.sandbox);
    await h.table.cancel(parent.id);
  });
});
