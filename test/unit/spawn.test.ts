// The spawn use case (src/jobs/spawn.ts) against a real job table and a fake run store, and the
// errors module's mapping to exit codes (src/lib/errors.ts).
import { mkdirSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import type { CliBackend, Usage } from '../../backends/types.js';
import { shippedModels } from '../../src/config/models.js';
import type { AgentDefinition } from '../../src/jobs/agents/definitions.js';
import { NO_SANDBOX, type SandboxSettings } from '../../src/config/sandbox.js';
import { spawnJob, type SpawnContext, type SpawnRequest } from '../../src/jobs/spawn.js';
import { JobTable, type JobRecord, type JobRequest } from '../../src/jobs/table.js';
import { commandFailure, ConfigError, InputError, SetupError } from '../../src/lib/errors.js';
import { tempDir } from '../helpers/temp.js';

const backend = backends.find((b) => b.kind === 'cli' && b.supportsResume)!;
const other = backends.find((b) => b !== backend && b.kind === 'cli')!;
const models = shippedModels(backends);
/** A session id as the CLIs report them. */
const THREAD = '01a21487-42f2-79c3-8ce6-cd24edf4ef90';
const totals = (inputTokens: number, outputTokens: number): Usage => ({
  inputTokens,
  outputTokens,
  cachedInputTokens: 0,
});

/** A job of an earlier process, as the run store holds it. */
const stored = (id: string, sessionId: string, sessionTotals: Usage, on = backend.name): JobRecord => ({
  id,
  backend: on,
  model: 'm',
  prompt: 'earlier',
  cwd: '/',
  timeoutS: 10,
  extra: {},
  state: 'succeeded',
  createdAt: '2026-01-01T00:00:00.000Z',
  outcome: { ok: true, text: '', sessionId, sessionTotals, costSource: 'unknown' },
});

function setup(
  options: {
    history?: JobRecord[];
    usable?: boolean;
    allowCwdOutsideProject?: boolean;
    isolation?: 'none' | 'worktree';
    backends?: SpawnContext['config']['backends'];
    allowCallerSandbox?: boolean;
  } = {},
) {
  const projectDir = tempDir('spawn');
  const history = new Map((options.history ?? []).map((r) => [r.id, r]));
  // Each job ends at once, in the session its prompt names ("session:<id>:<in>:<out>").
  const jobs = new JobTable({
    concurrency: 4,
    execute: async (job) => {
      const [, sessionId, inputTokens, outputTokens] = job.prompt.split(':');
      return {
        state: 'succeeded',
        outcome: {
          ok: true,
          text: '',
          sessionId,
          sessionTotals: totals(Number(inputTokens), Number(outputTokens)),
          costSource: 'unknown',
        },
      };
    },
    // The store's summaries carry no session: after a restart only get() finds the totals.
    store: {
      claimId: (id) => history.has(id),
      get: (id) => history.get(id),
      finished: () =>
        [...history.values()].map(({ outcome, ...rest }) => ({
          ...rest,
          outcome: { ...outcome!, sessionId: undefined },
        })),
    },
  });
  const sessionTurns: { request: JobRequest; newSession: boolean }[] = [];
  const ctx: SpawnContext = {
    config: {
      projectDir,
      timeoutS: 600,
      allowCwdOutsideProject: options.allowCwdOutsideProject ?? false,
      userConfigDir: join(projectDir, 'xdg', 'polyspawn'),
      isolation: options.isolation ?? 'none',
      backends: options.backends ?? {},
      allowCallerSandbox: options.allowCallerSandbox ?? false,
    },
    env: { PATH: process.env.PATH },
    models,
    jobs,
    sessions: {
      submit: (request, newSession) => {
        sessionTurns.push({ request, newSession });
        return jobs.submit(request);
      },
    },
    availability: () =>
      options.usable === false
        ? { usable: false, detail: 'not installed: install it' }
        : { usable: true, detail: 'ok' },
  };
  return { ctx, jobs, projectDir, sessionTurns };
}

const definition = (over: Partial<AgentDefinition> = {}): AgentDefinition => ({
  name: 'reviewer',
  description: 'Reviews',
  backend: backend.name,
  systemPrompt: 'You review.',
  session: false,
  nesting: 0,
  scope: 'project',
  file: '/agents/reviewer/agent.md',
  ...over,
});

describe('spawnJob', () => {
  test('a plain spawn: the default model, the project folder, the configured timeout', () => {
    const { ctx, projectDir } = setup();
    const job = spawnJob(ctx, {
      backend,
      label: `spawn_${backend.name}`,
      prompt: 'hi',
      systemPrompt: 'be brief',
      extra: { x: 1 },
    });
    expect(job).toMatchObject({
      backend: backend.name,
      model: models[backend.name]!.default,
      prompt: 'hi',
      cwd: projectDir,
      timeoutS: 600,
      systemPrompt: 'be brief',
      extra: { x: 1 },
    });
    expect(job.resumeSessionId).toBeUndefined();
  });

  test('a system prompt a backend takes as a command-line argument is capped in bytes, and said to be too large', () => {
    const { ctx } = setup();
    const byArgument = backends.find((b) => b.name === 'codex')!;
    const byFile = backends.find((b) => b.name === 'claude')!;
    // 150,000 characters are within the tool schema's 200,000, and over Linux's 128 KiB per argument.
    const long = 'x'.repeat(150_000);
    expect(() =>
      spawnJob(ctx, { backend: byArgument, label: 'spawn_codex', prompt: 'hi', systemPrompt: long }),
    ).toThrow(/system_prompt is too large for codex: 150\d{3} bytes.*at most \d+/);
    // Characters are not bytes: 50,000 three-byte characters are 150,000 bytes.
    expect(() =>
      spawnJob(ctx, { backend: byArgument, label: 'spawn_codex', prompt: 'hi', systemPrompt: '\u0800'.repeat(50_000) }),
    ).toThrow(InputError);
    // claude reads it from a file: no such limit.
    expect(
      spawnJob(ctx, { backend: byFile, label: 'spawn_claude', prompt: 'hi', systemPrompt: long }).systemPrompt,
    ).toBe(long);
  });

  test('resuming an agent of an earlier process: its stored record gives the totals to subtract', () => {
    const { ctx } = setup({ history: [stored('abcdef', THREAD, totals(12, 7))] });
    const job = spawnJob(ctx, { backend, label: backend.name, prompt: 'again', resume: 'abcdef' });
    expect(job.resumeSessionId).toBe(THREAD);
    expect(job.previousSessionTotals).toEqual(totals(12, 7));
  });

  test("the session's newest turn in the table wins over the record of the agent named", async () => {
    const { ctx, jobs } = setup({ history: [stored('abcdef', THREAD, totals(12, 7))] });
    const second = spawnJob(ctx, { backend, label: backend.name, prompt: `session:${THREAD}:30:20`, resume: 'abcdef' });
    await jobs.waitFor([second.id], { timeoutMs: 5000, mode: 'all' });
    const third = spawnJob(ctx, { backend, label: backend.name, prompt: 'third', resume: 'abcdef' });
    expect(third.previousSessionTotals).toEqual(totals(30, 20));
    // A session id works as well as an agent id.
    expect(
      spawnJob(ctx, { backend, label: backend.name, prompt: 'fourth', resume: THREAD }).previousSessionTotals,
    ).toEqual(totals(30, 20));
  });

  test('resume takes an agent_id or a session id (a UUID), never what a CLI could read as an option', () => {
    const { ctx } = setup({ history: [stored('abcdef', '--last', totals(1, 1))] });
    const spawn = (resume: string) => () => spawnJob(ctx, { backend, label: 'spawn_x', prompt: 'p', resume });
    for (const resume of [
      '--last',
      '--dangerously-bypass-approvals-and-sandbox',
      '--config=sandbox_mode="danger-full-access"',
      '-c',
      'a b',
      `${THREAD}\n--last`,
      // An earlier agent whose reported session id is not one.
      'abcdef',
    ]) {
      expect(spawn(resume)).toThrow(InputError);
      expect(spawn(resume)).toThrow(/resume: pass an agent_id \(from list\) or a session id \(a UUID, such as /);
    }
    expect(spawn(THREAD.toUpperCase())().resumeSessionId).toBe(THREAD.toUpperCase());
  });

  test('cwd stays inside the project, links resolved, unless the config allows more; the error says what to change', () => {
    const { ctx, projectDir } = setup();
    mkdirSync(join(projectDir, 'sub'));
    symlinkSync(tmpdir(), join(projectDir, 'out'));
    const spawn = (cwd: string) => spawnJob(ctx, { backend, label: 'spawn_x', prompt: 'p', cwd });
    expect(spawn('sub').cwd).toBe(join(projectDir, 'sub'));
    expect(spawn(join(projectDir, 'sub')).cwd).toBe(join(projectDir, 'sub'));
    expect(spawn('.').cwd).toBe(projectDir);
    for (const [cwd, dir] of [
      ['/', '/'],
      ['/etc', '/etc'],
      ['../..', resolve(projectDir, '../..')],
      ['out', join(projectDir, 'out')],
    ]) {
      expect(() => spawn(cwd!)).toThrow(InputError);
      expect(() => spawn(cwd!)).toThrow(
        `cwd "${dir}" is outside the project (${projectDir}): pass a folder inside it; to let agents work ` +
          `anywhere, set allow_cwd_outside_project: true in your own config (${join(projectDir, 'xdg', 'polyspawn', 'config.json')}) ` +
          'or POLYSPAWN_ALLOW_CWD_OUTSIDE_PROJECT=1 where the server is started',
      );
    }
    const anywhere = setup({ allowCwdOutsideProject: true }).ctx;
    expect(spawnJob(anywhere, { backend, label: 'spawn_x', prompt: 'p', cwd: '/' }).cwd).toBe('/');
  });

  test('each mistake is an InputError that says what to change; an unusable backend a SetupError', () => {
    const { ctx } = setup({ history: [stored('abcdef', THREAD, totals(1, 1), other.name)] });
    const spawn = (over: object) => () => spawnJob(ctx, { backend, label: 'spawn_x', prompt: 'p', ...over });
    expect(spawn({ model: '--no-such-model' })).toThrow(InputError);
    expect(spawn({ cwd: 'missing' })).toThrow(/cwd ".*missing" is not an existing folder: pass an existing folder/);
    expect(spawn({ outputSchema: { type: 'no-such-type' } })).toThrow(/^output_schema: /);
    expect(spawn({ resume: 'abcdef' })).toThrow(
      `agent abcdef ran on ${other.name}, not ${backend.name}: resume it with spawn_${other.name}`,
    );
    expect(spawn({ resume: 'zzzzzz' })).toThrow(/no agent with id "zzzzzz"/);
    const unusable = setup({ usable: false }).ctx;
    expect(() => spawnJob(unusable, { backend, label: 'spawn_x', prompt: 'p' })).toThrow(SetupError);
    expect(() => spawnJob(unusable, { backend, label: 'spawn_x', prompt: 'p' })).toThrow(
      'spawn_x cannot run here: not installed: install it',
    );
    expect(() =>
      spawnJob(unusable, { backend, label: 'spawn_reviewer', prompt: 'p', agent: { definition: definition() } }),
    ).toThrow(`spawn_reviewer cannot run here: its backend ${backend.name} is not usable: not installed: install it`);
  });

  test("a named agent: its definition's model, schema, timeout and system prompt; a session agent's turn goes to its session", () => {
    const { ctx, sessionTurns } = setup();
    const schema = { type: 'object' };
    const model = Object.values(models[backend.name]!.aliases)[0] ?? models[backend.name]!.default;
    const job = spawnJob(ctx, {
      backend,
      label: 'spawn_reviewer',
      prompt: 'p',
      agent: { definition: definition({ model, outputSchema: schema, timeoutS: 42 }) },
    });
    expect(job).toMatchObject({
      model,
      outputSchema: schema,
      timeoutS: 42,
      systemPrompt: 'You review.',
      agent: { name: 'reviewer' },
    });
    expect(sessionTurns).toEqual([]);
    spawnJob(ctx, {
      backend,
      label: 'spawn_chat',
      prompt: 'p',
      agent: { definition: definition({ name: 'chat', session: true }), newSession: true },
    });
    expect(sessionTurns).toMatchObject([{ request: { agent: { name: 'chat', session: true } }, newSession: true }]);
  });
  test("the sandbox: the user's config, a definition's over it, a caller's only where allowed; none never turns off a configured one", () => {
    const bwrap: SandboxSettings = { mode: 'bwrap', network: true, mounts: [{ path: '/data', write: false }] };
    const configured = (sandbox: SandboxSettings) => ({
      [backend.name]: { enabled: true, permission: 'p', allowTools: [], denyTools: [], env: [], sandbox },
    });
    const spawn = (ctx: SpawnContext, over: Partial<SpawnRequest> = {}) =>
      spawnJob(ctx, { backend, label: 'spawn_x', prompt: 'p', ...over });
    // None configured: no sandbox on the job at all.
    expect(spawn(setup().ctx).sandbox).toBeUndefined();
    const { ctx } = setup({ backends: configured(bwrap) });
    expect(spawn(ctx).sandbox).toEqual(bwrap);
    // A definition without network, its own mount beside the config's.
    const offline = definition({
      sandbox: { mode: 'bwrap', network: false, mounts: [{ path: '~/notes', write: true }] },
    });
    expect(spawn(ctx, { agent: { definition: offline } }).sandbox).toEqual({
      mode: 'bwrap',
      network: false,
      mounts: [
        { path: '/data', write: false },
        { path: '~/notes', write: true },
      ],
    });
    expect(() => spawn(ctx, { agent: { definition: definition({ sandbox: NO_SANDBOX }) } })).toThrow(
      /runs .* in bwrap .*agent reviewer's sandbox: none cannot turn it off/,
    );
    // A caller chooses only where the user's config says so, and never none over a configured one.
    expect(() => spawn(ctx, { sandbox: 'docker' })).toThrow(
      /does not let callers choose the sandbox.*allow_caller_sandbox/,
    );
    const open = setup({ backends: configured(bwrap), allowCallerSandbox: true }).ctx;
    expect(() => spawn(open, { sandbox: 'none' })).toThrow(InputError);
    expect(() => spawn(open, { sandbox: 'docker' })).toThrow(/sandbox docker needs an image/);
    const free = setup({ allowCallerSandbox: true }).ctx;
    expect(spawn(free, { sandbox: 'bwrap' }).sandbox).toEqual({ mode: 'bwrap', network: true, mounts: [] });
    expect(spawn(free, { sandbox: 'none' }).sandbox).toBeUndefined();
  });

  test("the network the user's config turned off stays off, whatever a definition or a caller says", () => {
    const offline: SandboxSettings = { mode: 'bwrap', network: false, mounts: [] };
    const configured = {
      [backend.name]: { enabled: true, permission: 'p', allowTools: [], denyTools: [], env: [], sandbox: offline },
    };
    const { ctx } = setup({ backends: configured, allowCallerSandbox: true });
    const spawn = (over: Partial<SpawnRequest>) => spawnJob(ctx, { backend, label: 'spawn_x', prompt: 'p', ...over });
    const wantsNetwork = definition({ sandbox: { mode: 'bwrap', network: true, mounts: [] } });
    expect(spawn({ agent: { definition: wantsNetwork } }).sandbox).toEqual(offline);
    // A definition's sandbox that leaves network out reads as on (the default): off here all the same.
    const plain = definition({ sandbox: { mode: 'bwrap', network: true, mounts: [{ path: '/notes', write: false }] } });
    expect(spawn({ agent: { definition: plain } }).sandbox).toMatchObject({ network: false });
    // A caller (where allowed) chooses a mode, never the network back.
    expect(spawn({ sandbox: 'bwrap' }).sandbox).toEqual(offline);
  });
});

describe('spawnJob for every door', () => {
  test("allowed_callers: the caller the request names, whichever door it came through, a session agent's turn too", () => {
    const { ctx, sessionTurns } = setup();
    const kept = definition({ allowedCallers: ['claude-code'] });
    const spawn = (caller: string | undefined, over: Partial<AgentDefinition> = {}) =>
      spawnJob(ctx, {
        backend,
        label: 'team member "reviewer"',
        prompt: 'p',
        ...(caller !== undefined ? { caller } : {}),
        agent: { definition: { ...kept, ...over } },
      });
    expect(spawn('Claude-Code ').id).toMatch(/^[a-z2-9]{6}$/);
    expect(() => spawn('vscode')).toThrow(
      /^team member "reviewer" refused: agent "reviewer" may be used only by the MCP clients "claude-code", and this client is "vscode"/,
    );
    // A terminal (polyspawn run) names no client: refused as well.
    expect(() => spawn(undefined)).toThrow(/this client is unnamed/);
    expect(() => spawn('vscode', { session: true })).toThrow(InputError);
    expect(sessionTurns).toHaveLength(0);
  });

  test("a supervisor's sandbox is the floor of the members it starts: kept or tightened, never more network", () => {
    const bwrapNoNet: SandboxSettings = { mode: 'bwrap', network: false, mounts: [] };
    const configured = (sandbox: SandboxSettings) => ({
      [backend.name]: { enabled: true, permission: 'p', allowTools: [], denyTools: [], env: [], sandbox },
    });
    const spawn = (ctx: SpawnContext, floor: SandboxSettings) =>
      spawnJob(ctx, {
        backend,
        label: 'team member',
        prompt: 'p',
        supervisor: { id: 'sup123', backend: backend.name, sandbox: floor },
      });
    expect(spawn(setup().ctx, bwrapNoNet).sandbox).toEqual(bwrapNoNet);
    expect(spawn(setup().ctx, NO_SANDBOX).sandbox).toBeUndefined();
    const docker: SandboxSettings = { mode: 'docker', network: true, mounts: [], image: 'me/cli:1' };
    expect(spawn(setup({ backends: configured(docker) }).ctx, bwrapNoNet).sandbox).toEqual({
      ...docker,
      network: false,
    });
  });

  test('a supervisor that narrows its permission or tools holds its members to the same; one that does not, to nothing', () => {
    const settings = (permission: string, denyTools: string[] = []) => ({
      [backend.name]: { enabled: true, permission, allowTools: [], denyTools, env: [], sandbox: NO_SANDBOX },
      [other.name]: { enabled: true, permission: 'x', allowTools: [], denyTools: [], env: [], sandbox: NO_SANDBOX },
    });
    const modes = (backend as CliBackend).permissionModes;
    const readOnly = modes.at(-1)!;
    const supervisor = { id: 'sup123', backend: backend.name, agent: { name: 'planner', permission: readOnly } };
    const { ctx } = setup({ backends: settings(modes[0]) });
    const spawn = (over: Partial<SpawnRequest>) =>
      spawnJob(ctx, { backend, label: 'team member "m"', prompt: 'p', supervisor, ...over });
    // A plain member runs in the config's (wider) mode: refused, saying what to name instead.
    expect(() => spawn({})).toThrow(
      new RegExp(
        `^team member "m": the supervisor that starts this team \\(agent sup123, planner\\) runs ${backend.name} with permission ${readOnly}, and its team may not run with more`,
      ),
    );
    expect(() => spawn({ backend: other })).toThrow(/may not run with more/);
    // A named agent on its backend in its mode is within it.
    const same = definition({ name: 'reader', permission: readOnly });
    expect(spawn({ agent: { definition: same } }).agent!.permission).toBe(readOnly);
    // A supervisor that narrows nothing leaves its members to the config.
    expect(spawn({ supervisor: { id: 'sup123', backend: backend.name } }).backend).toBe(backend.name);
  });
});

describe('commandFailure', () => {
  test('input: exit 2 with the usage; setup and configuration: exit 1; anything else is a bug', () => {
    expect(commandFailure(new InputError('wrong'))).toEqual({ message: 'wrong', exitCode: 2, withUsage: true });
    expect(commandFailure(new SetupError('install it'))).toEqual({
      message: 'install it',
      exitCode: 1,
      withUsage: false,
    });
    expect(commandFailure(new ConfigError('bad file'))).toEqual({
      message: 'configuration error: bad file',
      exitCode: 1,
      withUsage: false,
    });
    expect(commandFailure(new TypeError('oops'))).toBeUndefined();
  });
});

describe('isolation', () => {
  const api = backends.find((b) => b.kind === 'api')!;

  test('the call, else the definition, else the config (CLI backends only); base only with a worktree', () => {
    const { ctx } = setup({ isolation: 'worktree' });
    const label = `spawn_${backend.name}`;
    expect(spawnJob(ctx, { backend, label, prompt: 'a' })).toMatchObject({ isolation: 'worktree' });
    expect(spawnJob(ctx, { backend, label, prompt: 'a', isolation: 'none' }).isolation).toBeUndefined();
    const none = setup();
    expect(none.ctx.config.isolation).toBe('none');
    expect(spawnJob(none.ctx, { backend, label, prompt: 'a' }).isolation).toBeUndefined();
    expect(
      spawnJob(none.ctx, {
        backend,
        label,
        prompt: 'a',
        agent: { definition: definition({ isolation: 'worktree' }) },
      }),
    ).toMatchObject({ isolation: 'worktree' });
    expect(spawnJob(none.ctx, { backend, label, prompt: 'a', isolation: 'worktree', base: 'main' })).toMatchObject({
      isolation: 'worktree',
      base: 'main',
    });
    expect(() => spawnJob(none.ctx, { backend, label, prompt: 'a', base: 'main' })).toThrow(
      /base applies only with isolation "worktree"/,
    );
    expect(() => spawnJob(none.ctx, { backend, label, prompt: 'a', isolation: 'worktree', base: '--all' })).toThrow(
      /must name a branch, tag or commit/,
    );
    // A session agent's turns stay in the project unless its definition says otherwise (which its check refuses).
    expect(
      spawnJob(ctx, { backend, label, prompt: 'a', agent: { definition: definition({ session: true }) } }).isolation,
    ).toBeUndefined();
  });

  test('an API backend: the config default does not apply, and asking for a worktree is refused', () => {
    const { ctx } = setup({ isolation: 'worktree' });
    expect(spawnJob(ctx, { backend: api, label: `spawn_${api.name}`, prompt: 'a' }).isolation).toBeUndefined();
    expect(() =>
      spawnJob(ctx, { backend: api, label: `spawn_${api.name}`, prompt: 'a', isolation: 'worktree' }),
    ).toThrow(new InputError(`isolation: spawn_${api.name} answers from the prompt alone and works in no folder`));
  });

  test('resuming an isolated job continues in its worktree, on its base; resuming its resumer too', async () => {
    const { ctx, jobs } = setup();
    const label = `spawn_${backend.name}`;
    const first = spawnJob(ctx, { backend, label, prompt: `session:${THREAD}:1:1`, isolation: 'worktree' });
    await jobs.waitFor([first.id], { timeoutMs: 10_000, mode: 'all' });
    first.worktree = { path: '/p', branch: `polyspawn/${first.id}`, base: 'abc' };
    const second = spawnJob(ctx, { backend, label, prompt: `session:${THREAD}:2:2`, resume: first.id });
    expect(second).toMatchObject({ isolation: 'worktree', worktreeOf: first.id, base: 'abc' });
    await jobs.waitFor([second.id], { timeoutMs: 10_000, mode: 'all' });
    // By its session id: the newest turn's worktree, which is the first job's.
    const third = spawnJob(ctx, { backend, label, prompt: `session:${THREAD}:3:3`, resume: THREAD });
    expect(third).toMatchObject({ isolation: 'worktree', worktreeOf: first.id });
  });
});
