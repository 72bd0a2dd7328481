// The ACP presets (backends/acp-presets.ts) with the real, pinned agents through the built
// server, against the fake model API: copilot --acp (its BYOK mode, as cli.test.ts runs it), the
// claude adapter running the pinned claude, the codex adapter running the pinned codex. Each
// writes a file with its shell tool after a permission request that reaches the orchestrator
// (this test) with the tool call, is answered through reply_subagent, and the turn goes on; a
// cancel ends a turn that waits on the model, with nothing of the agent left running; resume
// through session/load; an ACP agent as a team's member; and a run in a worktree, then merged.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { TestServer } from '../helpers/mcp.js';
import { groupMembers } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';
import { initRepo, userGit as git } from '../helpers/git.js';
import { geminiApiKeyHome, startContractRig, type ContractRig } from './clis.js';
import { finishedAfterQuestions, type Job, type Question, type Waited } from '../helpers/jobs.js';

type Team = {
  team_id: string;
  state: string;
  answer?: string;
  members: { agent_id: string; member: string; role: string; state: string }[];
};

let rig: ContractRig;
let server: TestServer;

beforeAll(async () => {
  const config = join(tempDir('acp-contract'), 'config.json');
  // Gemini CLI reaches a local endpoint with an API key only when the user's settings say so (tests only).
  const geminiHome = geminiApiKeyHome(tempDir('acp-gemini-home'));
  rig = await startContractRig((clis, apiUrl) => {
    writeFileSync(
      config,
      JSON.stringify({
        acp_agents: {
          copilot_acp: { preset: 'copilot' },
          claude_acp: { preset: 'claude', command: clis.claudeAcp },
          codex_acp: { preset: 'codex', command: clis.codexAcp },
          gemini_acp: { preset: 'gemini', command: clis.gemini },
        },
      }),
    );
    return {
      POLYSPAWN_CONFIG: config,
      POLYSPAWN_COPILOT_ACP_BIN: clis.copilot,
      CLAUDE_CODE_EXECUTABLE: clis.claude,
      CODEX_PATH: clis.codex,
      GEMINI_API_KEY: 'contract-test-key',
      GOOGLE_GEMINI_BASE_URL: apiUrl,
      // Every CLI here keeps its state in a folder of its own variable; Gemini CLI's is under HOME.
      HOME: geminiHome,
    };
  });
  server = rig.server;
  // A repository, for the run in a worktree.
  initRepo(server.projectDir);
}, 900_000);

afterAll(() => rig?.close());

const runDir = (id: string) => join(server.projectDir, '.polyspawn', 'runs', id);
const log = (id: string) => readFileSync(join(runDir(id), 'stdout.log'), 'utf8');

async function waitOnce(id: string): Promise<Waited> {
  return server.callOk<Waited>('wait_for_agents', { agent_ids: [id], timeout_s: 150 });
}

/** Answers every permission question with its allow option until the agent ends; the questions asked. */
const allowUntilDone = (id: string) => finishedAfterQuestions(server, id, () => 'allow', 150);

// codex's own default model is one the fake does not offer its shell tool to; gpt-5.5 is set as
// the session's `model` option (the codex adapter takes it so).
// The codex adapter runs in read-only mode, whose shell asks only to leave its sandbox.
describe.each([
  ['copilot_acp', {}, 'tool'],
  ['claude_acp', {}, 'tool'],
  ['codex_acp', { model: 'gpt-5.5' }, 'tool-escalated'],
])('%s', (name, model, tool) => {
  test('a shell command writes a file after a permission the orchestrator answered', { timeout: 400_000 }, async () => {
    const file = `${name}-written.txt`;
    const { agent_id: id } = await server.callOk<Job>(`spawn_${name}`, {
      prompt: `Write the file. [[fake:${tool}:echo ${name} > ${file}]]`,
      ...model,
    });
    const { job, questions } = await allowUntilDone(id);
    expect(job.state, `${job.error}\n${log(id).slice(-3000)}`).toBe('succeeded');
    expect(existsSync(join(server.projectDir, file)), log(id).slice(-4000)).toBe(true);
    expect(readFileSync(join(server.projectDir, file), 'utf8').trim()).toBe(name);
    expect(job.text).toContain('TOOL_RESULT');
    expect(job.session_id).toMatch(/^[0-9a-f-]{36}$/);
    // The question carried the tool call; the log holds the request and the answer the client sent.
    expect(questions.length, log(id).slice(-3000)).toBeGreaterThan(0);
    expect(questions[0]!.question).toContain('The agent asks permission');
    const lines = log(id)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { from?: string; message?: { id?: unknown; method?: string; result?: unknown } });
    const asked = lines.find((l) => l.message?.method === 'session/request_permission')!;
    const answered = lines.find((l) => l.from === 'client' && l.message?.id === asked.message!.id && l.message?.result);
    expect(answered?.message?.result).toMatchObject({ outcome: { outcome: 'selected' } });
    process.stderr.write(
      `[${name}] permission request: ${JSON.stringify(asked.message).slice(0, 1500)}\n[${name}] question: ${questions[0]!.question}\n[${name}] answer sent: ${JSON.stringify(answered?.message)}\n`,
    );
  });

  test('on_permission deny: refused without a question, nothing written', { timeout: 400_000 }, async () => {
    const file = `${name}-denied.txt`;
    const { agent_id: id } = await server.callOk<Job>(`spawn_${name}`, {
      prompt: `Write the file. [[fake:${tool}:echo no > ${file}]]`,
      on_permission: 'deny',
      ...model,
    });
    const waited = await waitOnce(id);
    expect(waited.questions ?? []).toEqual([]);
    expect(waited.finished).toHaveLength(1);
    expect(existsSync(join(server.projectDir, file))).toBe(false);
  });

  test('cancel: the turn ends cancelled and nothing of the agent is left running', { timeout: 400_000 }, async () => {
    const { agent_id: id } = await server.callOk<Job>(`spawn_${name}`, {
      prompt: `Wait, ${name}. [[fake:slow:120000]]`,
      ...model,
    });
    // Cancelled once this agent's model request is under way.
    await expect
      .poll(() => rig.api.requests.some((r) => r.lastUserText.includes(`Wait, ${name}. [[fake:slow`)), {
        timeout: 120_000,
        interval: 200,
      })
      .toBe(true);
    const started = Date.now();
    await server.callOk('cancel', { agent_id: id });
    const waited = await waitOnce(id);
    expect(waited.finished[0]?.state).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(log(id)).toContain('"method":"session/cancel"');
    const record = JSON.parse(readFileSync(join(runDir(id), 'record.json'), 'utf8')) as { group?: { pgid: number } };
    expect(groupMembers(record.group!.pgid)).toEqual([]);
  });
});

describe('gemini_acp', () => {
  test(
    'write_file through the client, after a permission carrying its diff that the orchestrator answered',
    { timeout: 400_000 },
    async () => {
      const path = join(server.projectDir, 'gemini-acp.txt');
      const { agent_id: id } = await server.callOk<Job>('spawn_gemini_acp', {
        prompt: `Write the file. [[fake:write:${path}=written over acp]]`,
      });
      const { job, questions } = await allowUntilDone(id);
      expect(job.state, `${job.error}\n${log(id).slice(-4000)}`).toBe('succeeded');
      expect(readFileSync(path, 'utf8')).toBe('written over acp');
      expect(questions[0]?.question, log(id).slice(-4000)).toContain(
        `${path}\n--- before\n\n+++ after\nwritten over acp`,
      );
      // Gemini CLI wrote through the client's fs/write_text_file, confined to the job's folder.
      expect(log(id)).toContain('"method":"fs/write_text_file"');
      process.stderr.write(`[gemini_acp] question: ${questions[0]!.question}\n`);
    },
  );

  test('cancel ends the turn, nothing left running', { timeout: 400_000 }, async () => {
    const { agent_id: id } = await server.callOk<Job>('spawn_gemini_acp', {
      prompt: 'Wait, gemini_acp. [[fake:slow:120000]]',
    });
    await expect
      .poll(() => rig.api.requests.some((r) => r.lastUserText.includes('Wait, gemini_acp. [[fake:slow')), {
        timeout: 120_000,
        interval: 200,
      })
      .toBe(true);
    await server.callOk('cancel', { agent_id: id });
    const waited = await waitOnce(id);
    expect(waited.finished[0]?.state).toBe('cancelled');
    const record = JSON.parse(readFileSync(join(runDir(id), 'record.json'), 'utf8')) as { group?: { pgid: number } };
    expect(groupMembers(record.group!.pgid)).toEqual([]);
  });
});

// Every preset's agent advertises loadSession (acp-agents.md): a second spawn with `resume` loads
// the session in a new process of the agent, which sends the model the history with the new prompt.
describe.each([
  ['copilot_acp', {}],
  ['claude_acp', {}],
  ['codex_acp', { model: 'gpt-5.5' }],
])('%s resume', (name, model) => {
  test(
    'resume loads the session: the same session id, the earlier turn sent with the new one',
    { timeout: 400_000 },
    async () => {
      const first = await server.callOk<Job>(`spawn_${name}`, { prompt: `Remember ${name}-first.`, ...model });
      const one = (await allowUntilDone(first.agent_id)).job;
      expect(one.state, `${one.error}\n${log(one.agent_id).slice(-3000)}`).toBe('succeeded');
      const second = await server.callOk<Job>(`spawn_${name}`, {
        prompt: `And now ${name}-second.`,
        resume: one.agent_id,
        ...model,
      });
      const two = (await allowUntilDone(second.agent_id)).job;
      expect(two.state, `${two.error}\n${log(two.agent_id).slice(-3000)}`).toBe('succeeded');
      expect(two.session_id).toBe(one.session_id);
      expect(log(two.agent_id)).toContain('"method":"session/load"');
      // The answer is this turn's: the fake model saw two user turns, the first one among them.
      expect(two.text).toMatch(/^FAKE REPLY \(turn [2-9]\)/);
      const request = rig.api.requests.findLast((r) => r.lastUserText.includes(`${name}-second`))!;
      expect(request.rawBody).toContain(`${name}-first`);
      // Its tokens are this run's: the fake model answers 12 in, 7 out.
      expect(two.usage).toMatchObject({ input_tokens: 12, output_tokens: 7 });
      if (name === 'claude_acp') {
        // It reports the session's cost, the loaded turns included: each job is billed its own turn.
        expect(log(two.agent_id)).toContain(`"cost":{"amount":${2 * one.cost_usd!}`);
        expect(two).toMatchObject({ cost_source: 'reported', cost_usd: expect.closeTo(one.cost_usd!, 12) });
      }
      process.stderr.write(
        `[${name} resume] first: ${JSON.stringify({ usage: one.usage, cost_usd: one.cost_usd })} second: ${JSON.stringify({ usage: two.usage, cost_usd: two.cost_usd })}\n`,
      );
    },
  );
});

// Gemini CLI 0.61.0 advertises loadSession, but finds no earlier session of its own over ACP (its
// chats folder stays empty after an ACP turn): the spawn fails with its reason, said plainly.
test('gemini_acp resume: refused by the agent, with its reason', { timeout: 400_000 }, async () => {
  const first = await server.callOk<Job>('spawn_gemini_acp', { prompt: 'Remember gemini-first.' });
  const one = (await allowUntilDone(first.agent_id)).job;
  expect(one.state, one.error).toBe('succeeded');
  const second = await server.callOk<Job>('spawn_gemini_acp', { prompt: 'And now.', resume: one.agent_id });
  const two = (await allowUntilDone(second.agent_id)).job;
  expect(two.state).toBe('failed');
  expect(two.error).toContain(
    `gemini_acp could not load session ${one.session_id}: Internal error: Invalid session identifier`,
  );
});

describe('an ACP agent among others', () => {
  test('a team: an ACP agent drafts, the claude CLI gets the draft', { timeout: 600_000 }, async () => {
    const mark = `acp-team-${Date.now()}`;
    const started = await server.callOk<Team>('run_team', {
      topology: 'pipeline',
      members: ['copilot_acp', 'claude'],
      task: `${mark} write a haiku`,
    });
    let team = started;
    for (let i = 0; i < 12 && team.state === 'running'; i++) {
      const { teams } = await server.callOk<{ teams: Team[] }>('wait_for_agents', {
        agent_ids: [started.team_id],
        timeout_s: 50,
      });
      team = teams[0]!;
    }
    expect(team.state, JSON.stringify(team)).toBe('succeeded');
    expect(team.members.map((m) => `${m.role}:${m.member}:${m.state}`)).toEqual([
      'stage 1:copilot_acp:succeeded',
      'stage 2:claude:succeeded',
    ]);
    expect(team.answer).toContain(`stage 1 (copilot_acp) answered:\n\nFAKE REPLY (turn 1): `);
    expect(team.answer).toContain(`${mark} write a haiku`);
  });

  test(
    'a worktree: its shell command writes there after a permission answered; the change is on its branch, then merged',
    { timeout: 400_000 },
    async () => {
      const file = 'acp-in-worktree.txt';
      const spawned = await server.callOk<Job>('spawn_claude_acp', {
        prompt: `Write the file. [[fake:tool:echo from acp > ${file}]]`,
        isolation: 'worktree',
      });
      const { job, questions } = await allowUntilDone(spawned.agent_id);
      expect(job.state, `${job.error}\n${log(job.agent_id).slice(-3000)}`).toBe('succeeded');
      expect(questions.length).toBeGreaterThan(0);
      const worktree = join(server.projectDir, '.polyspawn', 'worktrees', job.agent_id);
      expect(job.worktree).toMatchObject({ path: worktree, branch: `polyspawn/${job.agent_id}`, files: [file] });
      // The agent worked in its worktree: session/new named it as the session's folder.
      expect(log(job.agent_id)).toContain(`"cwd":"${worktree}"`);
      expect(git(server.projectDir, 'show', `polyspawn/${job.agent_id}:${file}`)).toBe('from acp\n');
      expect(existsSync(join(server.projectDir, file))).toBe(false);
      await server.callOk('integrate', { agent_id: job.agent_id, how: 'merge' });
      expect(readFileSync(join(server.projectDir, file), 'utf8')).toBe('from acp\n');
    },
  );
});
