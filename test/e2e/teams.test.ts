// Teams (run_team) through the built server with the fake CLIs: every topology's flow as
// `result` returns it and IAC.md shows it, bad input, a failing member, cancel, the budget stop,
// a member's question waking the orchestrator's wait, and a restart after SIGKILL.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { initRepo, userGit } from '../helpers/git.js';
import { backendList, literal } from '../helpers/backends.js';
import { serverEntry, startServer, type TestServer } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

type Member = { agent_id: string; member: string; role: string; state: string };
type Team = {
  team_id: string;
  topology: string;
  state: string;
  members: Member[];
  answer?: string;
  error?: string;
  note?: string;
  budget_reached?: boolean;
  events: { kind: string; text: string }[];
  member_results?: { agent_id: string; team_id?: string; text?: string }[];
  child_team_ids?: string[];
  overlaps?: { file: string; agent_ids: string[] }[];
  parent_team_id?: string;
};

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close().catch(() => undefined);
});
async function server(env: Record<string, string> = {}, projectDir?: string) {
  const s = await startServer({ env, ...(projectDir ? { projectDir } : {}) });
  servers.push(s);
  return s;
}

/** Runs the team and waits for it (wait_for_agents, again while it is pending). */
async function runTeam(s: TestServer, args: Record<string, unknown>): Promise<Team> {
  const started = await s.callOk<Team>('run_team', args);
  expect(started.team_id).toMatch(/^team-[a-z2-9]{6}$/);
  for (let i = 0; i < 10; i++) {
    const waited = await s.callOk<{ teams: Team[] }>('wait_for_agents', {
      agent_ids: [started.team_id],
      timeout_s: 30,
    });
    const team = waited.teams[0]!;
    if (team.state !== 'running') return team;
  }
  throw new Error('the team did not finish');
}

const iac = (s: TestServer) => readFileSync(join(s.projectDir, 'IAC.md'), 'utf8');
const status = (projectDir: string) =>
  execFileSync(process.execPath, [serverEntry, 'status'], { cwd: projectDir, encoding: 'utf8' });

describe('run_team', () => {
  test(
    'map_reduce: three CLIs at once, then a reducer that gets every answer labelled',
    { timeout: 60_000 },
    async () => {
      const s = await server();
      const team = await runTeam(s, {
        topology: 'map_reduce',
        members: ['claude', 'codex', 'copilot'],
        task: 'Name a prime',
        options: { reduce_with: 'codex' },
      });
      expect(team.state).toBe('succeeded');
      expect(team.members.map((m) => m.role)).toEqual(['member 1', 'member 2', 'member 3', 'reduce']);
      expect(team.members.every((m) => m.state === 'succeeded')).toBe(true);
      // The reducer's prompt held the three answers, labelled; its answer is the team's.
      expect(team.answer).toMatch(/^FAKE codex: Name a prime/);
      for (const [i, name] of ['claude', 'codex', 'copilot'].entries())
        expect(team.answer).toContain(
          `### member ${i + 1}: ${name} (agent ${team.members[i]!.agent_id})\n\nFAKE ${name}: Name a prime`,
        );
      expect(team.member_results).toHaveLength(4);
      expect(team.member_results!.every((r) => r.team_id === team.team_id)).toBe(true);
      const listed = await s.callOk<{ teams: Team[]; agents: { agent_id: string; team_id?: string }[] }>('list');
      expect(listed.teams[0]!.team_id).toBe(team.team_id);
      expect(listed.agents.filter((a) => a.team_id === team.team_id)).toHaveLength(4);
      await waitFor(
        'IAC.md to show the team',
        () => {
          try {
            return iac(s).includes(`### \`${team.team_id}\` · \`map_reduce\` · ✅ succeeded`);
          } catch {
            return false;
          }
        },
        20_000,
      );
      const doc = iac(s);
      expect(doc).toContain('## Teams');
      for (const m of team.members) {
        expect(doc).toContain(`[\`${m.agent_id}\`](#agent-${m.agent_id})`);
        expect(doc).toContain(`<a id="agent-${m.agent_id}"></a>`);
      }
      expect(doc).toContain(`**Team:** \`${team.team_id}\``);
      // The terminal's view of the store lists it too.
      expect(status(s.projectDir)).toMatch(new RegExp(`${team.team_id} +succeeded +map_reduce +4 `));
    },
  );

  test(
    'map_reduce with items: one item to each member job, round robin; a failed member is said, the others count',
    { timeout: 60_000 },
    async () => {
      const s = await server();
      const team = await runTeam(s, {
        topology: 'map_reduce',
        members: ['codex', 'claude'],
        task: 'Review this file [[cli:fail-as:claude]]',
        options: { items: ['a.ts', 'b.ts', 'c.ts'] },
      });
      expect(team.members.map((m) => `${m.role}:${m.member}:${m.state}`)).toEqual([
        'item 1:codex:succeeded',
        'item 2:claude:failed',
        'item 3:codex:succeeded',
      ]);
      expect(team.state).toBe('succeeded');
      expect(team.answer).toContain('Your item (3 of 3):\n\nc.ts');
      expect(team.answer).toMatch(/### item 2: claude \(agent [a-z2-9]{6}\): FAILED/);
      expect(team.events.some((e) => e.kind === 'failed' && e.text.startsWith('item 2 (claude'))).toBe(true);
    },
  );

  test(
    'pipeline: each stage gets the previous answer; a failed stage stops the team, naming it',
    { timeout: 60_000 },
    async () => {
      const s = await server();
      const ok = await runTeam(s, { topology: 'pipeline', members: ['codex', 'claude'], task: 'Draft, then polish' });
      expect(ok.state).toBe('succeeded');
      expect(ok.answer).toMatch(
        /^FAKE claude: Draft, then polish[\s\S]*stage 1 \(codex\) answered:\n\nFAKE codex: Draft, then polish/,
      );

      const stopped = await runTeam(s, {
        topology: 'pipeline',
        members: ['codex', 'claude', 'copilot'],
        task: 'Three stages [[cli:fail-as:claude]]',
      });
      expect(stopped.state).toBe('failed');
      expect(stopped.error).toMatch(/^the pipeline stopped at stage 2 \(claude, agent [a-z2-9]{6}\) failed/);
      expect(stopped.members).toHaveLength(2); // stage 3 never started
      expect(stopped.answer).toMatch(/^FAKE codex/); // the last answer that came through

      const passed = await runTeam(s, {
        topology: 'pipeline',
        members: ['codex', 'claude', 'copilot'],
        task: 'Three stages [[cli:fail-as:claude]]',
        options: { on_failure: 'continue' },
      });
      expect(passed.state).toBe('succeeded');
      expect(passed.note).toMatch(/1 stage\(s\) failed and were passed over/);
      expect(passed.answer).toMatch(/^FAKE copilot[\s\S]*stage 1 \(codex\) answered/);
    },
  );

  test(
    'peer_ring: rounds in which each sees the others; a failing member drops out; a judge gives the verdict',
    { timeout: 60_000 },
    async () => {
      const s = await server();
      const team = await runTeam(s, {
        topology: 'peer_ring',
        members: ['codex', 'claude', 'copilot'],
        task: 'Tabs or spaces? [[cli:fail-as:copilot]]',
        options: { rounds: 2, judge: 'claude' },
      });
      expect(team.state).toBe('succeeded');
      expect(team.members.map((m) => m.role)).toEqual(['round 1', 'round 1', 'round 1', 'round 2', 'round 2', 'judge']);
      expect(team.events.some((e) => /round 1: .*copilot.*the debate goes on without it/.test(e.text))).toBe(true);
      expect(team.note).toBe('1 member(s) dropped out of the debate (see its events)');
      // The judge (claude) saw the two last answers; round 2's prompts held the others' round 1 answers.
      expect(team.answer).toMatch(/^FAKE claude: Tabs or spaces\?[\s\S]*Judge them/);
      expect(team.answer).toContain('Round 2 of 2 of a debate');
    },
  );

  test(
    'leader_teammate: the leader writes tasks, teammates claim them (each once), the leader answers',
    { timeout: 90_000 },
    async () => {
      const s = await server();
      const team = await runTeam(s, {
        topology: 'leader_teammate',
        members: ['claude', 'codex', 'copilot'],
        task: 'Split the work [[cli:team]] [[cli:tasks:alpha|beta|gamma|delta]]',
      });
      expect(team.state).toBe('succeeded');
      expect(team.answer).toMatch(/^LEAD t1=alpha by \d+, t2=beta by \d+, t3=gamma by \d+, t4=delta by \d+$/);
      const claims = team.events
        .filter((e) => / claimed t\d/.test(e.text))
        .map((e) => /claimed (t\d)/.exec(e.text)![1]);
      expect(claims.sort()).toEqual(['t1', 't2', 't3', 't4']); // every task claimed exactly once
      expect(team.members.map((m) => m.role)).toEqual(['leader', 'teammate 1', 'teammate 2']);
    },
  );

  test('blackboard: members write the board in rounds until one writes done', { timeout: 90_000 }, async () => {
    const s = await server();
    const team = await runTeam(s, {
      topology: 'blackboard',
      members: ['codex', 'claude'],
      task: 'Find the bug [[cli:team]] [[cli:done-round:2]]',
      options: { rounds: 4 },
    });
    expect(team.state).toBe('succeeded');
    expect(team.answer).toBe('DONE in round 2');
    // The member that wrote done finishes its run; the round's others are no longer needed.
    const author = /(\w+) wrote done:/.exec(team.events.map((e) => e.text).join('\n'))![1];
    expect(team.members.find((m) => m.agent_id === author)!.state).toBe('succeeded');
    expect(team.members.filter((m) => m.role.startsWith('member'))).toHaveLength(4); // two rounds of two
    expect(team.events.filter((e) => e.kind === 'board').length).toBeGreaterThanOrEqual(3);
  });

  test('supervisor_tree: a supervisor runs a team of its own, shown as its child', { timeout: 90_000 }, async () => {
    const s = await server();
    const sub = { topology: 'map_reduce', members: ['codex', 'copilot'], task: 'the part' };
    const team = await runTeam(s, {
      topology: 'supervisor_tree',
      members: ['claude'],
      task: `Supervise [[cli:team]] [[cli:subteam:${JSON.stringify(sub)}]]`,
    });
    expect(team.state).toBe('succeeded');
    expect(team.child_team_ids).toHaveLength(1);
    const child = await s.callOk<Team>('result', { agent_id: team.child_team_ids![0] });
    expect(child.parent_team_id).toBe(team.team_id);
    expect(child.state).toBe('succeeded');
    expect(team.answer).toContain(`SUPERVISED ${child.team_id}: ### member 1: codex`);
    // One level deeper only: a supervisor's team may not supervise a team of its own.
    const deeper = await runTeam(s, {
      topology: 'supervisor_tree',
      members: ['claude'],
      task: `Supervise [[cli:team]] [[cli:subteam:${JSON.stringify({ topology: 'supervisor_tree', members: ['claude'], task: 'x' })}]]`,
    });
    expect(deeper.answer).toMatch(/^SUPERVISE ERROR run_team: .*past the nesting limit of 1/);
    expect(deeper.child_team_ids).toBeUndefined();
  });

  test(
    'a preset (.polyspawn/teams/<name>.md) gives topology, members and options; its body leads every prompt',
    { timeout: 60_000 },
    async () => {
      const projectDir = tempDir('team-preset');
      mkdirSync(join(projectDir, '.polyspawn', 'teams'), { recursive: true });
      writeFileSync(
        join(projectDir, '.polyspawn', 'teams', 'review.md'),
        '---\ntopology: map_reduce\nmembers: [codex, copilot]\nreduce_with: claude\n---\n\nSecurity first.\n',
      );
      const s = await server({}, projectDir);
      const team = await runTeam(s, { team: 'review', task: 'Review the diff' });
      expect(team.state).toBe('succeeded');
      expect(team.members.map((m) => `${m.role}:${m.member}`)).toEqual([
        'member 1:codex',
        'member 2:copilot',
        'reduce:claude',
      ]);
      expect(team.answer).toMatch(/^FAKE claude: Security first\.\n\n---\n\nReview the diff/);
      expect(team.answer).toContain('FAKE codex: Security first.\n\n---\n\nReview the diff');
    },
  );

  test(
    'isolation "worktree": each CLI member in its own worktree; files two members changed are reported as overlaps',
    { timeout: 60_000 },
    async () => {
      const projectDir = tempDir('team-worktree');
      initRepo(projectDir);
      const s = await server({}, projectDir);
      const team = await runTeam(s, {
        topology: 'map_reduce',
        members: ['codex', 'claude'],
        task: 'Fix the config [[cli:write:src/config.ts=export const port = 1;]]',
        options: { isolation: 'worktree' },
      });
      expect(team.state).toBe('succeeded');
      const [a, b] = team.members.map((m) => m.agent_id);
      expect(team.overlaps).toEqual([{ file: 'src/config.ts', agent_ids: expect.arrayContaining([a, b]) }]);
      expect(userGit(projectDir, 'status', '--porcelain')).not.toMatch(/config/);
    },
  );

  test('bad input is refused with what to change, and nothing starts', async () => {
    const s = await server();
    const refusal = async (args: Record<string, unknown>) => {
      const r = await s.call('run_team', args);
      expect(r.isError).toBe(true);
      return JSON.stringify(r.content);
    };
    expect(await refusal({ topology: 'star', members: ['codex'], task: 't' })).toMatch(/topology/);
    expect(await refusal({ topology: 'map_reduce', members: ['nobody'], task: 't' })).toMatch(
      new RegExp(literal(`neither a backend (${backendList}) nor a named agent`)),
    );
    expect(await refusal({ topology: 'map_reduce', members: [], task: 't' })).toMatch(/members/);
    expect(
      await refusal({ topology: 'peer_ring', members: ['codex', 'claude'], task: 't', options: { rounds: 11 } }),
    ).toMatch(/rounds/);
    expect(await refusal({ topology: 'pipeline', members: ['codex'], task: 't' })).toMatch(/at least two stages/);
    expect(
      await refusal({ topology: 'map_reduce', members: ['codex'], task: 't', options: { judge: 'claude' } }),
    ).toMatch(/judge applies to peer_ring only/);
    expect(await refusal({ topology: 'blackboard', members: ['codex', 'grok'], task: 't' })).toMatch(/grok/);
    expect(await refusal({ team: 'missing', task: 't' })).toMatch(
      /team preset .*missing.* \(.*teams\/missing\.md\) cannot be used: there is no such file/,
    );
    expect((await s.callOk<{ agents: unknown[] }>('list')).agents).toHaveLength(0);
  });

  test('cancel ends every member; the budget stops new members and says so', { timeout: 60_000 }, async () => {
    const s = await server();
    const started = await s.callOk<Team>('run_team', {
      topology: 'map_reduce',
      members: ['codex', 'claude'],
      task: 'never ends [[cli:hang]]',
    });
    await waitFor(
      'members to run',
      async () => {
        const t = await s.callOk<Team>('result', { agent_id: started.team_id });
        return t.members.every((m) => m.state === 'running');
      },
      20_000,
    );
    const cancelled = await s.callOk<Team>('cancel', { agent_id: started.team_id });
    expect(cancelled.state).toBe('cancelled');
    expect(cancelled.members.map((m) => m.state)).toEqual(['cancelled', 'cancelled']);

    // claude (fake) reports $0.000188 a run: after the first stage the budget is spent.
    const budget = await runTeam(s, {
      topology: 'pipeline',
      members: ['claude', 'claude', 'claude'],
      task: 'costly',
      options: { max_budget_usd: 0.0001 },
    });
    expect(budget.state).toBe('failed');
    expect(budget.budget_reached).toBe(true);
    expect(budget.members).toHaveLength(1);
    expect(budget.error).toMatch(/budget reached: its members spent \$0\.0002 of max_budget_usd \$0\.0001/);
    expect(budget.answer).toMatch(/^FAKE claude: costly/); // the answer so far is kept
  });

  test(
    'the budget is checked when a queued member starts: map_reduce of 8 items at concurrency 1 runs one',
    { timeout: 60_000 },
    async () => {
      const s = await server({ POLYSPAWN_CONCURRENCY: '1' });
      const items = Array.from({ length: 8 }, (_, i) => `file${i + 1}.ts`);
      const team = await runTeam(s, {
        topology: 'map_reduce',
        members: ['claude'],
        task: 'Review',
        options: { items, max_budget_usd: 0.0001, reduce_with: 'claude' },
      });
      expect(team.budget_reached).toBe(true);
      expect(team.state).toBe('failed');
      expect(team.members.map((m) => m.state)).toEqual(['succeeded', ...Array(7).fill('cancelled')]);
      expect(team.error).toMatch(/^budget reached: its members spent \$0\.0002 of max_budget_usd \$0\.0001/);
      expect(team.answer).toMatch(/### item 1: claude \(agent [a-z2-9]{6}\)\n\nFAKE claude: Review/);
      const agents = (await s.callOk<{ agents: { state: string }[] }>('list')).agents;
      expect(agents.filter((a) => a.state === 'succeeded')).toHaveLength(1);
    },
  );

  test("a supervisor's child team inherits its isolation and draws from its budget", { timeout: 90_000 }, async () => {
    const projectDir = tempDir('team-child');
    initRepo(projectDir);
    const s = await server({ POLYSPAWN_CONCURRENCY: '2' }, projectDir);
    const sub = { topology: 'map_reduce', members: ['claude'], task: 'the part', options: { items: ['a', 'b', 'c'] } };
    const team = await runTeam(s, {
      topology: 'supervisor_tree',
      members: ['claude'],
      task: `Supervise [[cli:team]] [[cli:subteam:${JSON.stringify(sub)}]]`,
      options: { isolation: 'worktree', max_budget_usd: 0.0003 },
    });
    expect(team.child_team_ids).toHaveLength(1);
    const child = await s.callOk<
      Omit<Team, 'member_results'> & { member_results: { worktree?: { branch: string } }[] }
    >('result', {
      agent_id: team.child_team_ids![0],
    });
    // Items ran one at a time beside the supervisor: two spent $0.000376 of the parent's $0.0003.
    expect(child.members.map((m) => m.state)).toEqual(['succeeded', 'succeeded', 'cancelled']);
    expect(child.budget_reached).toBe(true);
    expect(child.error).toMatch(/^budget reached: its members spent \$0\.0004 of max_budget_usd \$0\.0003/);
    const ran = child.member_results.filter((r) => r.worktree);
    expect(ran).toHaveLength(2);
    expect(ran.every((r) => r.worktree!.branch.startsWith('polyspawn/'))).toBe(true);

    // A preset cannot widen them either: its options are the child's own.
    mkdirSync(join(projectDir, '.polyspawn', 'teams'), { recursive: true });
    writeFileSync(
      join(projectDir, '.polyspawn', 'teams', 'wide.md'),
      '---\ntopology: map_reduce\nmembers: [claude]\nisolation: none\nmax_budget_usd: 100\n---\n\nSpend.\n',
    );
    const widened = await runTeam(s, {
      topology: 'supervisor_tree',
      members: ['claude'],
      task: `Supervise [[cli:team]] [[cli:subteam:${JSON.stringify({ team: 'wide', task: 'x' })}]]`,
      options: { isolation: 'worktree', max_budget_usd: 1 },
    });
    expect(widened.answer).toMatch(
      /^SUPERVISE ERROR run_team: options\.max_budget_usd 100 is over the max_budget_usd of the team that runs you \(1\)/,
    );
    expect(widened.child_team_ids).toBeUndefined();
  });

  test(
    'a supervisor that is a named agent narrowing its permission holds its child team to it',
    { timeout: 90_000 },
    async () => {
      const projectDir = tempDir('team-permission');
      for (const name of ['planner', 'reader']) {
        mkdirSync(join(projectDir, '.polyspawn', 'agents', name), { recursive: true });
        writeFileSync(
          join(projectDir, '.polyspawn', 'agents', name, 'agent.md'),
          '---\ndescription: Reads only.\nbackend: claude\npermission: plan\n---\nYou read.\n',
        );
      }
      const s = await server({}, projectDir);
      const supervise = (members: string[]) =>
        runTeam(s, {
          topology: 'supervisor_tree',
          members: ['planner'],
          task: `Supervise [[cli:team]] [[cli:subteam:${JSON.stringify({ topology: 'map_reduce', members, task: 'x' })}]]`,
        });
      const refused = await supervise(['codex']);
      expect(refused.answer).toMatch(
        /^SUPERVISE ERROR run_team: team member "codex": the supervisor that starts this team \(agent [a-z2-9]{6}, planner\) runs claude with permission plan/,
      );
      expect(refused.child_team_ids).toBeUndefined();
      const within = await supervise(['reader']);
      expect(within.answer).toMatch(/^SUPERVISED team-[a-z2-9]{6}: ### member 1: reader/);
    },
  );

  test("a member's question wakes the orchestrator's wait on the team", { timeout: 60_000 }, async () => {
    const s = await server();
    const started = await s.callOk<Team>('run_team', {
      topology: 'map_reduce',
      members: ['codex'],
      task: '[[cli:ask:Which file?]]',
    });
    const waited = await s.callOk<{ questions: { agent_id: string; message_id: string }[]; teams: Team[] }>(
      'wait_for_agents',
      { agent_ids: [started.team_id], timeout_s: 40 },
    );
    expect(waited.teams[0]!.state).toBe('running');
    const q = waited.questions[0]!;
    await s.callOk('reply_subagent', { agent_id: q.agent_id, message_id: q.message_id, answer: 'main.ts' });
    const done = await runTeam(s, { topology: 'map_reduce', members: ['codex'], task: 'other' });
    expect(done.state).toBe('succeeded');
    const team = (await s.callOk<{ teams: Team[] }>('wait_for_agents', { agent_ids: [started.team_id], timeout_s: 40 }))
      .teams[0]!;
    expect(team.answer).toContain('ANSWER main.ts');
  });

  test('a team whose server was killed is interrupted for the next server', { timeout: 60_000 }, async () => {
    const projectDir = tempDir('team-restart');
    const first = await server({}, projectDir);
    const started = await first.callOk<Team>('run_team', {
      topology: 'map_reduce',
      members: ['codex'],
      task: 'never ends [[cli:hang]]',
    });
    await waitFor(
      'the member to run',
      async () => {
        const t = await first.callOk<Team>('result', { agent_id: started.team_id });
        return t.members[0]?.state === 'running';
      },
      20_000,
    );
    process.kill(first.transport.pid!, 'SIGKILL');
    await first.close().catch(() => undefined);
    // Read by `polyspawn status` (which only reads): still running, its server gone.
    expect(status(projectDir)).toMatch(new RegExp(`${started.team_id} +running \\(server gone\\) +map_reduce`));
    const second = await server({}, projectDir);
    const team = await second.callOk<Team>('result', { agent_id: started.team_id });
    expect(team.state).toBe('interrupted');
    expect(team.error).toMatch(/^interrupted: the polyspawn server that ran it/);
    // Its members were interrupted with it: the team's list never says running after a restart.
    expect(team.members.map((m) => m.state)).toEqual(['interrupted']);
    const listed = await second.callOk<{ teams: Team[] }>('list');
    expect(listed.teams.find((t) => t.team_id === started.team_id)!.members.map((m) => m.state)).toEqual([
      'interrupted',
    ]);
    await waitFor(
      'IAC.md to show the team interrupted',
      () => {
        try {
          return iac(second).includes(`### \`${started.team_id}\` · \`map_reduce\``);
        } catch {
          return false;
        }
      },
      20_000,
    );
    const entry = iac(second).split(`### \`${started.team_id}\``)[1]!.split('\n### ')[0]!;
    expect(entry).toMatch(/interrupted/);
    expect(entry).not.toMatch(/running/i);
  });
});
