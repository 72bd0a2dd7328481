// Named agents, sessions, structured output, caller rules and nesting, through the built
// server and the SDK client, with the fake CLIs recording what they were started with.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startServer, type TestServer } from '../helpers/mcp.js';
import { modelVisibleBytes } from '../../src/mcp/tool-list.js';
import { fakeCliRecords, recordOf, waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

type Job = {
  agent_id: string;
  agent?: string;
  state: string;
  text?: string;
  error?: string;
  session_id?: string;
  structured?: unknown;
  started_at?: string;
  ended_at?: string;
  usage?: unknown;
};
type Waited = { finished: Job[]; pending: Job[] };

const recordDir = tempDir('agents-records');
const records = () => fakeCliRecords(recordDir);
/** The value of `flag` in argv, given as `flag value` or `flag=value`. */
const argAfter = (argv: string[], flag: string) => {
  const joined = argv.find((a) => a.startsWith(`${flag}=`));
  if (joined !== undefined) return joined.slice(flag.length + 1);
  const at = argv.indexOf(flag);
  return at < 0 ? undefined : argv[at + 1];
};

const baseEnv = {
  FAKE_CLI_RECORD: recordDir,
  FAKE_CLI_RECORD_ENV: 'POLYSPAWN_DEPTH,POLYSPAWN_ALLOW_DEPTH',
  POLYSPAWN_CONCURRENCY: '4',
};
const agentsDir = (project: string) => join(project, '.polyspawn', 'agents');
const userAgentsDir = (project: string) => join(project, '.xdg-config', 'polyspawn', 'agents');

/** Writes agents/<name>/agent.md the way editors save: a temp file renamed over the old one. */
function writeAgent(dir: string, name: string, text: string): string {
  mkdirSync(join(dir, name), { recursive: true });
  const file = join(dir, name, 'agent.md');
  writeFileSync(`${file}.tmp~`, text);
  renameSync(`${file}.tmp~`, file);
  return file;
}
const agentText = (fields: Record<string, string>, prompt = 'You are a test agent.') =>
  `---\n${Object.entries(fields)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n')}\n---\n${prompt}\n`;

const finish = async (s: TestServer, ids: string[]) =>
  (await s.callOk<Waited>('wait_for_agents', { agent_ids: ids, timeout_s: 30 })).finished;
const toolNames = async (s: TestServer) => (await s.client.listTools()).tools.map((t) => t.name);

describe('definitions on disk become tools, and the list follows the files', () => {
  let s: TestServer;
  let changes = 0;
  beforeAll(async () => {
    // No .polyspawn folder at all yet: the watcher must find the agents folder when it appears.
    s = await startServer({ env: baseEnv });
    s.client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      changes++;
    });
  });
  afterAll(async () => s?.close());

  const changed = async (what: string, check: (names: string[]) => boolean | Promise<boolean>) => {
    const before = changes;
    await waitFor(`list_changed (${what})`, () => changes > before);
    // A change may come as a remove and a register: wait until the list says what it should.
    let ok = false;
    for (let i = 0; i < 100 && !(ok = await check(await toolNames(s))); i++)
      await new Promise((r) => setTimeout(r, 30));
    expect(ok, what).toBe(true);
  };

  test('added, changed and removed while the client is connected', async () => {
    expect(existsSync(join(s.projectDir, '.polyspawn'))).toBe(false);
    expect(await toolNames(s)).not.toContain('spawn_helper');

    const file = writeAgent(
      agentsDir(s.projectDir),
      'helper',
      agentText({ description: 'First description.', backend: 'claude' }),
    );
    await changed('added', (names) => names.includes('spawn_helper'));
    const tool = (await s.client.listTools()).tools.find((t) => t.name === 'spawn_helper')!;
    expect(tool.description).toMatch(/^First description\./);
    expect(Object.keys(tool.inputSchema.properties!)).toEqual(
      expect.arrayContaining(['prompt', 'model', 'cwd', 'resume', 'output_schema']),
    );
    expect(Object.keys(tool.inputSchema.properties!)).not.toContain('system_prompt');

    writeAgent(
      agentsDir(s.projectDir),
      'helper',
      agentText({ description: 'Second description.', backend: 'claude', model: 'opus' }),
    );
    await changed(
      'changed',
      async () =>
        (await s.client.listTools()).tools.find((t) => t.name === 'spawn_helper')?.description?.startsWith('Second') ??
        false,
    );
    const changedTool = (await s.client.listTools()).tools.find((t) => t.name === 'spawn_helper')!;
    expect(Object.keys(changedTool.inputSchema.properties!)).not.toContain('model'); // fixed by the definition now

    rmSync(join(agentsDir(s.projectDir), 'helper'), { recursive: true });
    await changed('removed', (names) => !names.includes('spawn_helper'));
    expect(existsSync(file)).toBe(false);
  });

  test('an invalid file is skipped with a message in the log and in list_agents; fixing it serves it', async () => {
    const file = writeAgent(agentsDir(s.projectDir), 'broken', agentText({ description: 'x', backend: 'gpt' }));
    await waitFor('the log line', () => s.stderr().includes(`agent definition ${file} skipped: unknown backend "gpt"`));
    const listed = await s.callOk<{ problems: { file: string; problem: string }[] }>('list_agents');
    expect(listed.problems).toEqual([
      expect.objectContaining({ file, problem: expect.stringMatching(/unknown backend "gpt"/) }),
    ]);
    expect(await toolNames(s)).not.toContain('spawn_broken');
    writeAgent(agentsDir(s.projectDir), 'broken', agentText({ description: 'x', backend: 'codex' }));
    await changed('fixed', (names) => names.includes('spawn_broken'));
    expect((await s.callOk<{ problems: unknown[] }>('list_agents')).problems).toEqual([]);
  });

  test('an agent runs with what its definition fixes', async () => {
    writeAgent(
      agentsDir(s.projectDir),
      'fixed',
      agentText(
        {
          description: 'Reads only.',
          backend: 'claude',
          model: 'opus',
          allow: '[Read, "Bash(git diff:*)"]',
          deny: '[Write]',
          mcp_servers: '{ docs: { command: docs-mcp, args: [--ro], env: { DOCS_TOKEN: tok-1234567890abcdef } } }',
        },
        'You only read.',
      ),
    );
    await changed('fixed added', (names) => names.includes('spawn_fixed'));
    const marker = `fixed-${Date.now()}`;
    const job = await s.callOk<Job>('spawn_fixed', { prompt: marker, wait_s: 30 });
    expect(job).toMatchObject({ state: 'succeeded', agent: 'fixed' });
    const { argv, files } = recordOf(recordDir, marker);
    expect(argAfter(argv, '--model')).toBe('opus');
    // The definition's prompt, then the line about the channel to the orchestrator, in a file.
    expect(files[argAfter(argv, '--append-system-prompt-file')!]).toMatch(
      /^You only read\.\n\nWhen a decision is not yours to make, ask/,
    );
    expect(argAfter(argv, '--permission-mode')).toBe('dontAsk');
    expect(argv).not.toContain('--dangerously-skip-permissions');
    expect(argv.slice(argv.indexOf('--allowedTools'), argv.indexOf('--allowedTools') + 3)).toEqual([
      '--allowedTools',
      'Read',
      'Bash(git diff:*)',
    ]);
    expect(argAfter(argv, '--disallowedTools')).toBe('Write');
    expect(argv).toContain('--strict-mcp-config');
    // The CLI read the token from a file of the run's (beside the channel to the orchestrator),
    // which was removed when the run ended.
    const mcpConfig = argAfter(argv, '--mcp-config')!;
    expect(JSON.parse(files[mcpConfig]!).mcpServers.docs).toEqual({
      type: 'stdio',
      command: 'docs-mcp',
      args: ['--ro'],
      env: { DOCS_TOKEN: 'tok-1234567890abcdef' },
    });
    expect(Object.keys(JSON.parse(files[mcpConfig]!).mcpServers)).toEqual(['docs', 'parent']);
    expect(existsSync(mcpConfig)).toBe(false);
    const stored = readFileSync(join(s.projectDir, '.polyspawn', 'runs', job.agent_id, 'record.json'), 'utf8');
    expect(stored).toContain('"name": "fixed"');
    expect(stored).not.toContain('tok-1234567890abcdef');
    expect(await s.callError('spawn_fixed', { prompt: 'x', model: 'sonnet' })).toMatch(/Unrecognized key.*model/);
  });
});

describe('define_agent, remove_agent and list_agents', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ env: baseEnv });
  });
  afterAll(async () => s?.close());

  const good = {
    name: 'writer',
    description: 'Writes docs.',
    backend: 'codex',
    system_prompt: 'You write clear docs.',
  };

  test.each([
    [{ ...good, name: 'Writer!' }, /lower-case letters, digits/],
    [{ ...good, name: '-rf' }, /the name "-rf" must start with a lower-case letter/],
    [{ ...good, name: '_' }, /the name "_" must start with a lower-case letter/],
    [{ ...good, name: 'codex' }, /spawn_codex, the codex backend's own tool/],
    [{ ...good, backend: 'gpt' }, /unknown backend "gpt"/],
    [{ ...good, description: ' ' }, /description is empty/],
    [{ ...good, system_prompt: '\n' }, /system prompt .* is empty/],
    [{ ...good, output_schema: { type: 12 } }, /output_schema: the output schema is not a valid JSON Schema/],
    [{ ...good, allow: ['shell'] }, /codex has no per-tool allow or deny lists/],
    [{ ...good, model: '-nope' }, /unknown model "-nope" for codex, and not a plain model name/],
    [{ ...good, scope: 'team' }, /scope/],
  ])('refused before writing: %#', async (args, message) => {
    expect(await s.callError('define_agent', args)).toMatch(message);
    expect(existsSync(join(agentsDir(s.projectDir), String(args.name)))).toBe(false);
  });

  test('define in the project, refuse a silent overwrite, replace, list, remove', async () => {
    const defined = await s.callOk<{ file: string; tool: string; replaced: boolean }>('define_agent', {
      ...good,
      session: true,
      output_schema: { type: 'object' },
    });
    expect(defined).toMatchObject({
      tool: 'spawn_writer',
      replaced: false,
      file: join(agentsDir(s.projectDir), 'writer', 'agent.md'),
    });
    const text = readFileSync(defined.file, 'utf8');
    expect(text).toMatch(
      /^---\nname: writer\ndescription: Writes docs\.\nbackend: codex\nsession: true\noutput_schema:\n {2}type: object\n---\n\nYou write clear docs\.\n$/,
    );
    expect(readdirSync(join(agentsDir(s.projectDir), 'writer'))).toEqual(['agent.md']); // no temp file left
    expect(await toolNames(s)).toContain('spawn_writer'); // at once, not after the watcher's delay

    expect(await s.callError('define_agent', good)).toMatch(/already exists .* pass replace: true/);
    const replaced = await s.callOk<{ replaced: boolean }>('define_agent', {
      ...good,
      description: 'Writes better docs.',
      replace: true,
    });
    expect(replaced.replaced).toBe(true);

    const listed = await s.callOk<{
      agents: { name: string; description: string; scope: string; session: boolean; usable_by_this_client: boolean }[];
      folders: { project: string };
    }>('list_agents');
    expect(listed.agents).toEqual([
      expect.objectContaining({
        name: 'writer',
        description: 'Writes better docs.',
        scope: 'project',
        session: false,
        usable_by_this_client: true,
      }),
    ]);
    expect(listed.folders.project).toBe(agentsDir(s.projectDir));

    const removed = await s.callOk<{ removed: string }>('remove_agent', { name: 'writer' });
    expect(removed.removed).toBe(defined.file);
    expect(existsSync(join(agentsDir(s.projectDir), 'writer'))).toBe(false);
    expect(await toolNames(s)).not.toContain('spawn_writer');
    expect(await s.callError('remove_agent', { name: 'writer' })).toMatch(/no agent "writer"/);
  });

  test('a link in the agents folder (a repository can ship one) is refused: nothing outside is written or deleted', async () => {
    const outside = tempDir('outside');
    const victim = join(outside, 'agent.md');
    const victimText = agentText({ description: 'Not yours to delete.', backend: 'codex' });
    const dir = agentsDir(s.projectDir);
    mkdirSync(dir, { recursive: true });
    // A linked agent folder: define_agent would write into it, remove_agent delete from it.
    symlinkSync(outside, join(dir, 'linked'));
    expect(await s.callError('define_agent', { ...good, name: 'linked' })).toBe(
      `agent "linked" not defined: ${join(dir, 'linked')} is a symbolic link, and polyspawn neither writes nor ` +
        'deletes through links in an agents folder (they can lead out of it): remove the link, or choose another name',
    );
    expect(readdirSync(outside)).toEqual([]);
    writeFileSync(victim, victimText);
    expect(await s.callError('remove_agent', { name: 'linked' })).toMatch(
      new RegExp(`^agent "linked" not removed: ${join(dir, 'linked')} is a symbolic link`),
    );
    // A linked agent.md.
    mkdirSync(join(dir, 'filelink'));
    symlinkSync(victim, join(dir, 'filelink', 'agent.md'));
    expect(await s.callError('remove_agent', { name: 'filelink' })).toMatch(
      new RegExp(`^agent "filelink" not removed: ${join(dir, 'filelink', 'agent.md')} is a symbolic link`),
    );
    expect(await s.callError('define_agent', { ...good, name: 'filelink', replace: true })).toMatch(
      /^agent "filelink" not defined: .* is a symbolic link/,
    );
    expect(readFileSync(victim, 'utf8')).toBe(victimText);
    expect(readdirSync(outside)).toEqual(['agent.md']);
    rmSync(join(dir, 'linked'));
    rmSync(join(dir, 'filelink'), { recursive: true });
  });

  test('the agents folder itself a link out of the project: refused too', async () => {
    const project = tempDir('linked-agents');
    const outside = tempDir('outside');
    mkdirSync(join(project, '.polyspawn'));
    symlinkSync(outside, agentsDir(project));
    const other = await startServer({ env: baseEnv, projectDir: project });
    try {
      expect(await other.callError('define_agent', good)).toMatch(
        new RegExp(`^agent "writer" not defined: ${agentsDir(project)} is a symbolic link`),
      );
      expect(readdirSync(outside)).toEqual([]);
    } finally {
      await other.close();
    }
  });

  test('at most 100 named agents: the 101st is refused with what to do, a replacement is not; their tools cost a model at most ~800 B each', async () => {
    const full = await startServer({ env: baseEnv });
    try {
      // The longest description a definition may hold: its tool shows the start of it.
      const description = 'Reviews a change for bugs, naming and missing tests. '.repeat(40).slice(0, 2000);
      for (let i = 0; i < 100; i++)
        await full.callOk('define_agent', { ...good, name: `w${String(i).padStart(3, '0')}`, description });
      const agentTools = (await full.client.listTools()).tools.filter((t) => /^spawn_w\d{3}$/.test(t.name));
      expect(agentTools).toHaveLength(100);
      const visible = agentTools.reduce((sum, t) => sum + modelVisibleBytes(t), 0);
      expect(visible, `${visible} B for 100 named agents' tools`).toBeLessThanOrEqual(80_000);
      expect(agentTools[0]!.description).toMatch(/ … \(list_agents has the rest\)\n\n\(a named agent on codex/);
      const listed = await full.callOk<{ agents: { name: string; description: string }[] }>('list_agents');
      expect(listed.agents.find((a) => a.name === 'w000')!.description).toBe(description);
      expect(await full.callError('define_agent', { ...good, name: 'one-more' })).toMatch(
        /^agent "one-more" not defined: there are 100 named agents already, the most polyspawn serves: remove one with remove_agent first/,
      );
      expect(existsSync(join(agentsDir(full.projectDir), 'one-more'))).toBe(false);
      await full.callOk('define_agent', { ...good, name: 'w000', description: 'Replaced.', replace: true });
      await full.callOk('remove_agent', { name: 'w099' });
      await full.callOk('define_agent', { ...good, name: 'one-more' });
      const names = await toolNames(full);
      expect(names.filter((n) => /^spawn_(w\d{3}|one-more)$/.test(n))).toHaveLength(100);
      expect(names).toContain('spawn_one-more');
    } finally {
      await full.close();
    }
  });

  test('user scope, and the project definition of the same name wins', async () => {
    const user = await s.callOk<{ file: string }>('define_agent', {
      ...good,
      name: 'both',
      description: 'user one',
      scope: 'user',
    });
    expect(user.file).toBe(join(userAgentsDir(s.projectDir), 'both', 'agent.md'));
    const project = await s.callOk<{ file: string }>('define_agent', {
      ...good,
      name: 'both',
      description: 'project one',
    });
    type Listed = { agents: { name: string; description: string; file: string; shadows?: string }[] };
    const listed = await s.callOk<Listed>('list_agents');
    expect(listed.agents.find((a) => a.name === 'both')).toMatchObject({
      description: 'project one',
      file: project.file,
      shadows: user.file,
    });
    const tool = (await s.client.listTools()).tools.find((t) => t.name === 'spawn_both')!;
    expect(tool.description).toMatch(/^project one/);
    // Defining the user one again says the project one is in effect.
    const again = await s.callOk<{ note?: string }>('define_agent', {
      ...good,
      name: 'both',
      description: 'user two',
      scope: 'user',
      replace: true,
    });
    expect(again.note).toMatch(/project definition of the same name .* takes precedence/);
    expect(await s.callError('remove_agent', { name: 'both', scope: 'user', extra: 1 })).toMatch(/Unrecognized key/);
    const removed = await s.callOk<{ now_in_effect?: string }>('remove_agent', { name: 'both' });
    expect(removed.now_in_effect).toBe(user.file);
    expect((await s.client.listTools()).tools.find((t) => t.name === 'spawn_both')!.description).toMatch(/^user two/);
  });
});

describe('sessions', () => {
  let s: TestServer;
  let project: string;
  beforeAll(async () => {
    project = tempDir('sessions');
    writeAgent(
      agentsDir(project),
      'chat',
      agentText({ description: 'Remembers.', backend: 'claude', session: 'true' }),
    );
    writeAgent(
      agentsDir(project),
      'coder',
      agentText({ description: 'Remembers too.', backend: 'codex', session: 'true' }),
    );
    s = await startServer({ env: baseEnv, projectDir: project });
  });
  afterAll(async () => {
    await s?.close();
    rmSync(project, { recursive: true, force: true });
  });

  test("the second call resumes the first one's session", async () => {
    const tool = (await s.client.listTools()).tools.find((t) => t.name === 'spawn_chat')!;
    expect(Object.keys(tool.inputSchema.properties!)).toContain('new_session');
    expect(Object.keys(tool.inputSchema.properties!)).not.toContain('resume');
    const first = await s.callOk<Job>('spawn_chat', { prompt: 'chat one', wait_s: 30 });
    expect(first.state).toBe('succeeded');
    expect(argAfter(recordOf(recordDir, 'chat one').argv, '--resume')).toBeUndefined();
    const second = await s.callOk<Job>('spawn_chat', { prompt: 'chat two', wait_s: 30 });
    expect(second.session_id).toBe(first.session_id);
    expect(argAfter(recordOf(recordDir, 'chat two').argv, '--resume')).toBe(first.session_id);

    const c1 = await s.callOk<Job>('spawn_coder', { prompt: 'coder one', wait_s: 30 });
    await s.callOk<Job>('spawn_coder', { prompt: 'coder two', wait_s: 30 });
    const argv = recordOf(recordDir, 'coder two').argv;
    expect(argv.slice(0, 2)).toEqual(['exec', 'resume']);
    expect(argv.at(-2)).toBe(c1.session_id);
  });

  test('two calls at once run one after the other, the second resuming the first', async () => {
    const [a, b] = await Promise.all([
      s.callOk<Job>('spawn_chat', { prompt: 'together A [[cli:sleep:600]]' }),
      s.callOk<Job>('spawn_chat', { prompt: 'together B [[cli:sleep:100]]' }),
    ]);
    // Whichever the server took first, the other waits for it.
    const listed = await s.callOk<{ agents: Job[] }>('list');
    const states = [a, b].map((j) => listed.agents.find((x) => x.agent_id === j.agent_id)!.state);
    expect(states.filter((st) => st === 'running').length).toBeLessThanOrEqual(1);
    const done = await finish(s, [a.agent_id, b.agent_id]);
    const [earlier, later] = [...done].sort((x, y) => Date.parse(x.started_at!) - Date.parse(y.started_at!));
    expect(Date.parse(later!.started_at!)).toBeGreaterThanOrEqual(Date.parse(earlier!.ended_at!));
    const laterPrompt = later!.agent_id === a.agent_id ? 'together A' : 'together B';
    expect(argAfter(recordOf(recordDir, laterPrompt).argv, '--resume')).toBe(earlier!.session_id);
    expect(later!.session_id).toBe(earlier!.session_id);
  });

  test('new_session starts over; the next call continues the new one', async () => {
    const before = await s.callOk<{ agents: { name: string; session_id?: string }[] }>('list_agents');
    const old = before.agents.find((x) => x.name === 'chat')!.session_id!;
    const fresh = await s.callOk<Job>('spawn_chat', { prompt: 'chat fresh', new_session: true, wait_s: 30 });
    expect(argAfter(recordOf(recordDir, 'chat fresh').argv, '--resume')).toBeUndefined();
    expect(fresh.session_id).not.toBe(old);
    await s.callOk<Job>('spawn_chat', { prompt: 'chat after fresh', wait_s: 30 });
    expect(argAfter(recordOf(recordDir, 'chat after fresh').argv, '--resume')).toBe(fresh.session_id);
  });

  test('the session survives a restart of the server', async () => {
    const last = (await s.callOk<{ agents: { name: string; session_id?: string }[] }>('list_agents')).agents.find(
      (x) => x.name === 'chat',
    )!.session_id!;
    await s.close();
    expect(JSON.parse(readFileSync(join(project, '.polyspawn', 'sessions', 'chat.json'), 'utf8'))).toMatchObject({
      backend: 'claude',
      sessionId: last,
    });
    s = await startServer({ env: baseEnv, projectDir: project });
    const job = await s.callOk<Job>('spawn_chat', { prompt: 'chat after restart', wait_s: 30 });
    expect(job.session_id).toBe(last);
    expect(argAfter(recordOf(recordDir, 'chat after restart').argv, '--resume')).toBe(last);
  });
});

describe('structured output', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ env: baseEnv });
  });
  afterAll(async () => s?.close());
  const schema = {
    type: 'object',
    properties: { name: { type: 'string' } },
    required: ['name'],
    additionalProperties: false,
  };

  test('claude gets --json-schema; an answer that does not match is retried once in the same session, then fails with the errors', async () => {
    const job = await s.callOk<Job>('spawn_claude', {
      prompt: 'so-claude-mismatch',
      output_schema: schema,
      wait_s: 30,
    });
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/did not match the output schema, also after one retry .*the answer is not JSON/);
    expect(job.structured).toBeUndefined();
    const first = recordOf(recordDir, 'so-claude-mismatch');
    expect(JSON.parse(argAfter(first.argv, '--json-schema')!)).toEqual(schema);
    expect(first.prompt).toContain(`JSON Schema: ${JSON.stringify(schema)}`);
    const retry = records().find(
      (r) =>
        r.prompt.startsWith('Your answer did not match the required JSON Schema') &&
        argAfter(r.argv, '--resume') === job.session_id,
    )!;
    expect(retry.prompt).toContain('the answer is not JSON');
    expect(argAfter(retry.argv, '--resume')).toBe(job.session_id);
    expect(argAfter(retry.argv, '--json-schema')).toBe(JSON.stringify(schema));
    const logs = readdirSync(join(s.projectDir, '.polyspawn', 'runs', job.agent_id));
    expect(logs).toEqual(expect.arrayContaining(['stdout.log', 'stdout.attempt-1.log']));
  });

  test('valid JSON that breaks the schema: the errors name the field', async () => {
    const job = await s.callOk<Job>('spawn_claude', {
      prompt: 'so-claude-type ```json\n{"name": 5}\n```',
      output_schema: schema,
      wait_s: 30,
    });
    expect(job.state).toBe('failed');
    const retry = records().find(
      (r) => r.prompt.startsWith('Your answer did not match') && argAfter(r.argv, '--resume') === job.session_id,
    )!;
    expect(retry.prompt).toContain('/name must be string');
  });

  test('codex gets --output-schema FILE; a matching answer lands in structuredContent', async () => {
    const result = await s.call('spawn_codex', {
      prompt: 'so-codex-ok\n```json\n{"name": "polyspawn"}\n```',
      output_schema: schema,
      wait_s: 30,
    });
    const job = result.structuredContent as Job;
    expect(job).toMatchObject({ state: 'succeeded', structured: { name: 'polyspawn' } });
    const seen = recordOf(recordDir, 'so-codex-ok');
    const file = argAfter(seen.argv, '--output-schema')!;
    expect(JSON.parse(seen.files[file]!)).toEqual(schema);
    // Given to the CLI for the run only.
    expect(existsSync(file)).toBe(false);
    expect(await s.callOk<Job>('result', { agent_id: job.agent_id })).toMatchObject({
      structured: { name: 'polyspawn' },
    });
  });

  test('copilot has no flag: the server validates alone', async () => {
    const job = await s.callOk<Job>('spawn_copilot', {
      prompt: 'so-copilot-ok ```json\n{"name": "c"}\n```',
      output_schema: schema,
      wait_s: 30,
    });
    expect(job).toMatchObject({ state: 'succeeded', structured: { name: 'c' } });
  });

  test('a catastrophic pattern does not freeze the server: the job fails at once and the other tools answer meanwhile', async () => {
    const started = Date.now();
    const job = await s.callOk<Job>('spawn_codex', {
      prompt: `so-redos\n\`\`\`json\n"${'a'.repeat(29)}!"\n\`\`\``,
      output_schema: { type: 'string', pattern: '^(a+)+$' },
    });
    let slowestList = 0;
    let finished: Job | undefined;
    while (!finished) {
      const asked = Date.now();
      const listed = await s.callOk<{ agents: Job[] }>('list', {});
      slowestList = Math.max(slowestList, Date.now() - asked);
      finished = listed.agents.find(
        (a) => a.agent_id === job.agent_id && a.state !== 'queued' && a.state !== 'running',
      );
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(finished.state).toBe('failed');
    expect((await s.callOk<Job>('result', { agent_id: job.agent_id })).error).toMatch(/must match pattern/);
    // A backtracking engine blocks the server 14 s per check (two checks: the answer and its retry).
    expect(slowestList).toBeLessThan(5000);
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  test('a pattern with a backreference is refused on a spawn and in a definition, naming the engine', async () => {
    const schemaWith = { type: 'string', pattern: '^(a)\\1$' };
    expect(await s.callError('spawn_codex', { prompt: 'so-backref', output_schema: schemaWith })).toMatch(
      /output_schema: the output schema's pattern "\^\(a\)\\1\$" cannot be used: .*RE2/,
    );
    expect(
      await s.callError('define_agent', {
        name: 'backref',
        description: 'Refused.',
        backend: 'codex',
        system_prompt: 'x',
        output_schema: schemaWith,
      }),
    ).toMatch(/pattern "\^\(a\)\\1\$" cannot be used/);
    expect(() => recordOf(recordDir, 'so-backref')).toThrow();
  });

  test('an agent carries its schema; a bad schema on a spawn is refused', async () => {
    writeAgent(
      agentsDir(s.projectDir),
      'namer',
      agentText({ description: 'Names things.', backend: 'codex', output_schema: JSON.stringify(schema) }),
    );
    for (let i = 0; i < 200 && !(await toolNames(s)).includes('spawn_namer'); i++)
      await new Promise((r) => setTimeout(r, 25));
    const tool = (await s.client.listTools()).tools.find((t) => t.name === 'spawn_namer')!;
    expect(Object.keys(tool.inputSchema.properties!)).not.toContain('output_schema');
    const job = await s.callOk<Job>('spawn_namer', { prompt: 'so-agent ```json\n{"name": "n"}\n```', wait_s: 30 });
    expect(job).toMatchObject({ state: 'succeeded', agent: 'namer', structured: { name: 'n' } });
    expect(await s.callError('spawn_claude', { prompt: 'x', output_schema: { type: 'nope' } })).toMatch(
      /output_schema: the output schema is not a valid JSON Schema/,
    );
  });
});

describe('caller rules', () => {
  test('only the named MCP clients may use an agent, through every door', { timeout: 90_000 }, async () => {
    const project = tempDir('callers');
    writeAgent(
      agentsDir(project),
      'private',
      agentText({ description: 'Only for Claude Code.', backend: 'claude', allowed_callers: '[claude-code]' }),
    );
    const allowed = await startServer({ env: baseEnv, projectDir: project, clientName: 'claude-code' });
    const other = await startServer({ env: baseEnv, projectDir: project, clientName: 'Visual Studio Code' });
    try {
      const ok = await allowed.callOk<Job>('spawn_private', { prompt: 'caller allowed', wait_s: 30 });
      expect(ok.state).toBe('succeeded');
      const refusal = await other.callError('spawn_private', { prompt: 'caller refused' });
      expect(refusal).toMatch(
        /^spawn_private refused: agent "private" may be used only by the MCP clients "claude-code", and this client is "Visual Studio Code"/,
      );
      expect(() => recordOf(recordDir, 'caller refused')).toThrow();
      const listed = await other.callOk<{ agents: { usable_by_this_client: boolean }[] }>('list_agents');
      expect(listed.agents[0]!.usable_by_this_client).toBe(false);

      // Every door: as a team's member, the same refusal, before any member starts.
      const asMember = await other.callError('run_team', {
        topology: 'map_reduce',
        members: ['codex', 'private'],
        task: 'member refused',
      });
      expect(asMember).toMatch(/^team member "private" refused: agent "private" may be used only by/);
      expect(() => recordOf(recordDir, 'member refused')).toThrow();
      // A supervisor's child team asks in the name of the client its team runs for.
      const sub = JSON.stringify({ topology: 'map_reduce', members: ['private'], task: 'child member refused' });
      const supervised = async (s: TestServer) => {
        const started = await s.callOk<{ team_id: string }>('run_team', {
          topology: 'supervisor_tree',
          members: ['claude'],
          task: `Supervise [[cli:team]] [[cli:subteam:${sub}]]`,
        });
        for (;;) {
          const waited = await s.callOk<{ teams: { state: string; answer?: string }[] }>('wait_for_agents', {
            agent_ids: [started.team_id],
            timeout_s: 30,
          });
          if (waited.teams[0]!.state !== 'running') return waited.teams[0]!.answer ?? '';
        }
      };
      const childRuns = () =>
        records().filter((r) => r.prompt.includes('child member refused') && !r.prompt.includes('[[cli:subteam'));
      expect(await supervised(other)).toMatch(/^SUPERVISE ERROR run_team: team member "private" refused/);
      expect(childRuns()).toHaveLength(0);
      expect(await supervised(allowed)).toMatch(/^SUPERVISED team-[a-z2-9]{6}: ### member 1: private/);
      expect(childRuns()).toHaveLength(1);
    } finally {
      await allowed.close();
      await other.close();
      rmSync(project, { recursive: true, force: true });
    }
  });
});

describe('nesting', () => {
  test('every child gets the depth marker; an agent that allows nesting passes an allowance', async () => {
    const project = tempDir('nesting');
    writeAgent(
      agentsDir(project),
      'planner',
      agentText({ description: 'May delegate.', backend: 'claude', allow_nesting: 'true' }),
    );
    // A stale allowance in the server's own environment must not reach its children.
    const s = await startServer({ env: { ...baseEnv, POLYSPAWN_ALLOW_DEPTH: '2' }, projectDir: project });
    try {
      await s.callOk<Job>('spawn_claude', { prompt: 'nest plain', wait_s: 30 });
      expect(recordOf(recordDir, 'nest plain').env).toMatchObject({
        POLYSPAWN_DEPTH: '1',
        POLYSPAWN_ALLOW_DEPTH: null,
      });
      await s.callOk<Job>('spawn_planner', { prompt: 'nest planner', wait_s: 30 });
      expect(recordOf(recordDir, 'nest planner').env).toMatchObject({
        POLYSPAWN_DEPTH: '1',
        POLYSPAWN_ALLOW_DEPTH: '1',
      });
    } finally {
      await s.close();
      rmSync(project, { recursive: true, force: true });
    }
  });

  test('a polyspawn started inside an agent serves no spawn tools, says why, and refuses spawn calls', async () => {
    const project = tempDir('nested');
    writeAgent(agentsDir(project), 'helper', agentText({ description: 'Helps.', backend: 'claude' }));
    const s = await startServer({ env: { ...baseEnv, POLYSPAWN_DEPTH: '1' }, projectDir: project });
    try {
      const names = await toolNames(s);
      expect(names.filter((n) => n.startsWith('spawn_') || n === 'define_agent' || n === 'remove_agent')).toEqual([]);
      expect(names).toEqual(expect.arrayContaining(['list', 'result', 'wait_for_agents', 'list_agents']));
      expect(s.client.getInstructions()).toMatch(
        /serves no spawn tools: it was started inside an agent that polyspawn runs \(POLYSPAWN_DEPTH=1\).*allow_nesting/,
      );
      for (const tool of ['spawn_claude', 'spawn_helper']) {
        expect(await s.callError(tool, { prompt: 'nested call' })).toMatch(
          new RegExp(`^${tool} refused: this polyspawn starts no agents, because it was started inside an agent`),
        );
      }
      expect(() => recordOf(recordDir, 'nested call')).toThrow();
      expect((await s.callOk<{ agents: unknown[] }>('list')).agents).toEqual([]);
    } finally {
      await s.close();
      rmSync(project, { recursive: true, force: true });
    }
  });

  test('started with a cleared environment (as codex starts its MCP servers) inside an agent, it still knows it is nested', async () => {
    // The shell stands for the codex child (it has the marker); it starts polyspawn with `env -i`.
    const clearing = [
      '/bin/sh',
      '-c',
      'env -i PATH="$PATH" HOME="$HOME" XDG_CONFIG_HOME="$XDG_CONFIG_HOME" "$0" "$@"; exit $?',
    ];
    const s = await startServer({ env: { ...baseEnv, POLYSPAWN_DEPTH: '1' }, launcher: clearing });
    try {
      expect((await toolNames(s)).filter((n) => n.startsWith('spawn_'))).toEqual([]);
      expect(s.client.getInstructions()).toMatch(/serves no spawn tools: .*POLYSPAWN_DEPTH=1/);
    } finally {
      await s.close();
    }
  });

  test('with an allowance it serves them, but never at the hard maximum depth', async () => {
    const allowed = await startServer({ env: { ...baseEnv, POLYSPAWN_DEPTH: '1', POLYSPAWN_ALLOW_DEPTH: '1' } });
    try {
      expect(await toolNames(allowed)).toContain('spawn_claude');
      await allowed.callOk<Job>('spawn_claude', { prompt: 'nest allowed child', wait_s: 30 });
      expect(recordOf(recordDir, 'nest allowed child').env).toMatchObject({
        POLYSPAWN_DEPTH: '2',
        POLYSPAWN_ALLOW_DEPTH: null,
      });
    } finally {
      await allowed.close();
    }
    const deepest = await startServer({ env: { ...baseEnv, POLYSPAWN_DEPTH: '3', POLYSPAWN_ALLOW_DEPTH: '9' } });
    try {
      expect((await toolNames(deepest)).filter((n) => n.startsWith('spawn_'))).toEqual([]);
      expect(deepest.client.getInstructions()).toMatch(/never nests agents deeper than 3/);
    } finally {
      await deepest.close();
    }
  });
});
