// Teams over the real CLIs, through the built server, against the fake model API: a map_reduce
// of claude, codex and copilot with a real reducer, and a two-stage pipeline from codex to claude.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { TestServer } from '../helpers/mcp.js';
import { startContractRig, type ContractRig } from './clis.js';

type Team = {
  team_id: string;
  state: string;
  answer?: string;
  error?: string;
  members: { agent_id: string; member: string; role: string; state: string }[];
  member_results?: { agent_id: string; state: string; text?: string; team_id?: string }[];
};

let rig: ContractRig;
let server: TestServer;

beforeAll(async () => {
  rig = await startContractRig();
  ({ server } = rig);
}, 900_000);

afterAll(() => rig?.close());

async function runTeam(args: Record<string, unknown>): Promise<Team> {
  const started = await server.callOk<Team>('run_team', args);
  for (let i = 0; i < 12; i++) {
    const { teams } = await server.callOk<{ teams: Team[] }>('wait_for_agents', {
      agent_ids: [started.team_id],
      timeout_s: 50,
    });
    if (teams[0]!.state !== 'running') return teams[0]!;
  }
  throw new Error(`team ${started.team_id} did not finish`);
}

describe('teams of the real CLIs', () => {
  test('map_reduce: claude, codex and copilot at once, reduced by claude', { timeout: 600_000 }, async () => {
    const mark = `team-map-${Date.now()}`;
    const team = await runTeam({
      topology: 'map_reduce',
      members: ['claude', 'codex', 'copilot'],
      task: `${mark} name a colour`,
      options: { reduce_with: 'claude' },
    });
    expect(team.state, JSON.stringify(team)).toBe('succeeded');
    expect(team.members.map((m) => `${m.role}:${m.member}:${m.state}`)).toEqual([
      'member 1:claude:succeeded',
      'member 2:codex:succeeded',
      'member 3:copilot:succeeded',
      'reduce:claude:succeeded',
    ]);
    for (const r of team.member_results!.slice(0, 3))
      expect(r.text).toMatch(new RegExp(`^FAKE REPLY \\(turn 1\\): ${mark}`));
    // The reducer's answer is the team's; the model it asked got every member's answer, labelled.
    expect(team.answer).toBe(team.member_results![3]!.text);
    const reduce = rig.api.requests.filter((r) => r.rawBody.includes("Write the team's answer from them"));
    expect(reduce.length).toBeGreaterThanOrEqual(1);
    for (const [i, m] of team.members.slice(0, 3).entries()) {
      expect(reduce[0]!.rawBody).toContain(`### member ${i + 1}: ${m.member} (agent ${m.agent_id})`);
      expect(reduce[0]!.rawBody).toContain(`FAKE REPLY (turn 1): ${mark} name a colour`);
    }
  });

  test('pipeline: codex drafts, claude gets the draft', { timeout: 600_000 }, async () => {
    const mark = `team-pipe-${Date.now()}`;
    const team = await runTeam({ topology: 'pipeline', members: ['codex', 'claude'], task: `${mark} write a haiku` });
    expect(team.state, JSON.stringify(team)).toBe('succeeded');
    expect(team.members.map((m) => `${m.role}:${m.member}:${m.state}`)).toEqual([
      'stage 1:codex:succeeded',
      'stage 2:claude:succeeded',
    ]);
    expect(team.answer).toMatch(new RegExp(`^FAKE REPLY \\(turn 1\\): ${mark} write a haiku`));
    expect(team.answer).toContain(`stage 1 (codex) answered:\n\nFAKE REPLY (turn 1): ${mark} write a haiku`);
  });
});
