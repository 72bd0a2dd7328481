// CLI agents in a sandbox, through the built server: bubblewrap for real (the fake CLI tries to
// get out); the arguments docker and podman are given, through a fake engine
// (test/fakes/fake-engine.mjs) that runs the command it is given, wherever no engine answers. The
// real engines run agents in test/e2e/containers.test.ts.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, onTestFinished, test } from 'vitest';
import { fakeBinDir, repoRoot, startServer, type TestServer } from '../helpers/mcp.js';
import { markedProcesses } from '../helpers/process-groups.js';
import { waitFor, waitGone } from '../helpers/processes.js';
import { bwrapWorks } from '../helpers/tools.js';

type Job = { agent_id: string; state: string; text?: string; error?: string; sandbox?: string };

const fakes = join(repoRoot, 'test', 'fakes');
const root = mkdtempSync(join(tmpdir(), 'polyspawn-sandbox-'));
/** The user's home: a secret in it, and codex's own folder. */
const home = join(root, 'home');
/** A folder of the host outside everything the sandbox binds. */
const outside = join(root, 'outside');
const engineDir = join(root, 'engine');
for (const dir of [home, outside, engineDir]) mkdirSync(dir, { recursive: true });
writeFileSync(join(home, 'secret.txt'), 'the-home-secret\n');
writeFileSync(join(outside, 'kept.txt'), 'outside\n');
const userConfig = join(root, 'config.json');
writeFileSync(
  userConfig,
  JSON.stringify({
    allow_caller_sandbox: true,
    backends: {
      // The fake CLIs live in the checkout, which the sandbox does not otherwise show (its channel
      // side loads the MCP SDK from node_modules).
      codex: { sandbox: { mode: 'bwrap', mounts: [{ path: fakes }, { path: join(repoRoot, 'node_modules') }] } },
      claude: { sandbox: { mode: 'docker', image: 'example.org/agents:1' } },
      sandacp: { sandbox: { mode: 'bwrap', mounts: [{ path: fakes }, { path: join(repoRoot, 'node_modules') }] } },
    },
    // An ACP agent (the fake one) in bubblewrap like any CLI agent.
    acp_agents: {
      sandacp: { command: process.execPath, args: [join(fakes, 'fake-acp-agent.mjs')], start_timeout_s: 30 },
    },
  }),
);

const serverEnv = {
  HOME: home,
  // The offline agent's codex is pointed at a model server on the sandbox's own loopback (the fake
  // CLI asks none): without one, network: false is refused. claude is pointed at none.
  OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
  ANTHROPIC_BASE_URL: '',
  // The shared server's token, were this a client of it: never in an agent's environment.
  POLYSPAWN_TOKEN: 'psp_e2e-sandbox-token-never-in-a-child-0123',
  POLYSPAWN_CONFIG: userConfig,
  FAKE_ENGINE_DIR: engineDir,
  PATH: `${join(fakes, 'engine')}${delimiter}${fakeBinDir}${delimiter}${process.env.PATH}`,
};

let s: TestServer;
let project: string;
beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), 'polyspawn-sandbox-project-'));
  mkdirSync(join(project, '.polyspawn', 'agents', 'offline'), { recursive: true });
  writeFileSync(
    join(project, '.polyspawn', 'agents', 'offline', 'agent.md'),
    '---\ndescription: Works without a network.\nbackend: codex\nsandbox: { mode: bwrap, network: false }\n---\nYou work offline.\n',
  );
  mkdirSync(join(project, '.polyspawn', 'agents', 'cutoff'), { recursive: true });
  writeFileSync(
    join(project, '.polyspawn', 'agents', 'cutoff', 'agent.md'),
    '---\ndescription: No network, no model API.\nbackend: claude\nsandbox: { mode: docker, image: example.org/agents:1, network: false }\n---\nYou work.\n',
  );
  // The user's own agent (a project's may not ask for a secret at all); startServer's XDG_CONFIG_HOME.
  const userAgents = join(project, '.xdg-config', 'polyspawn', 'agents');
  mkdirSync(join(userAgents, 'greedy'), { recursive: true });
  writeFileSync(
    join(userAgents, 'greedy', 'agent.md'),
    '---\ndescription: Asks for the server token.\nbackend: codex\nenv: [POLYSPAWN_TOKEN]\n---\nYou work.\n',
  );
  // What a shared server and the user leave in the project: its token, another agent's worktree, keys.
  writeFileSync(join(project, '.polyspawn', 'http-token'), 'psp_the-daemon-token-0123456789abcdef\n');
  mkdirSync(join(project, '.polyspawn', 'worktrees', 'other2'), { recursive: true });
  writeFileSync(join(project, '.polyspawn', 'worktrees', 'other2', 'theirs.txt'), 'theirs\n');
  writeFileSync(join(project, 'api_keys.json'), '{"XAI_API_KEY": "xai-e2e-sandbox-key-0123456789"}\n');
  writeFileSync(join(project, 'tracked.txt'), 'tracked\n');
  // Links an agent (or the repository) left in the project, to the store and to the home folder.
  symlinkSync(join(project, '.polyspawn'), join(project, 'store-link'));
  symlinkSync(home, join(project, 'home-link'));
  for (const args of [
    ['init', '-q'],
    ['add', 'tracked.txt'],
    ['commit', '-qm', 'init'],
  ])
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: project, stdio: 'ignore' });
  s = await startServer({ projectDir: project, env: serverEnv });
}, 60_000);
afterAll(async () => {
  await s?.close();
  rmSync(project, { recursive: true, force: true });
  rmSync(root, { recursive: true, force: true });
});

const attempts = async (tool: string, directives: string[], extra: Record<string, unknown> = {}) => {
  const job = await s.callOk<Job>(tool, { prompt: `try ${directives.join(' ')}`, wait_s: 60, ...extra });
  expect(job.state, job.error).toBe('succeeded');
  return { job, tried: JSON.parse(job.text!) as Record<string, string> };
};

describe.skipIf(!bwrapWorks)('bwrap', () => {
  test('the agent writes its folder, and cannot read the home folder, write outside its folder, or see the host /tmp', async () => {
    writeFileSync(join(tmpdir(), 'polyspawn-sandbox-host-tmp-marker'), 'host\n');
    onTestFinished(() => rmSync(join(tmpdir(), 'polyspawn-sandbox-host-tmp-marker'), { force: true }));
    const runStore = join(project, '.polyspawn', 'index.jsonl');
    const { job, tried } = await attempts('spawn_codex', [
      `[[cli:try-write:${join(project, 'made-inside.txt')}]]`,
      `[[cli:read:${join(home, 'secret.txt')}]]`,
      `[[cli:list:${home}]]`,
      `[[cli:read:${join(outside, 'kept.txt')}]]`,
      `[[cli:try-write:${join(outside, 'escaped.txt')}]]`,
      `[[cli:try-write:${runStore}]]`,
      `[[cli:try-write:/usr/escaped.txt]]`,
      `[[cli:read:${join(tmpdir(), 'polyspawn-sandbox-host-tmp-marker')}]]`,
      `[[cli:try-write:/tmp/made-in-private-tmp.txt]]`,
      '[[cli:read:/proc/self/status]]',
    ]);
    // Root in the sandbox (as CI runs) keeps no capability: it cannot mount or open files by handle past the binds.
    expect(tried['read:/proc/self/status']).toMatch(/CapEff:\s+0{16}\b/);
    expect(tried['read:/proc/self/status']).toMatch(/NoNewPrivs:\s+1\b/);
    delete tried['read:/proc/self/status'];
    expect(job.sandbox).toBe('bwrap');
    expect(tried).toEqual({
      [`try-write:${join(project, 'made-inside.txt')}`]: 'ok',
      [`read:${join(home, 'secret.txt')}`]: 'ENOENT',
      // codex's own folder, bound for it; nothing else of the home folder
      [`list:${home}`]: 'ok: .codex',
      [`read:${join(outside, 'kept.txt')}`]: 'ENOENT',
      [`try-write:${join(outside, 'escaped.txt')}`]: 'ENOENT',
      // The store is an empty, read-only folder: its index is not there.
      [`try-write:${runStore}`]: 'EROFS',
      'try-write:/usr/escaped.txt': 'EROFS',
      [`read:${join(tmpdir(), 'polyspawn-sandbox-host-tmp-marker')}`]: 'ENOENT',
      'try-write:/tmp/made-in-private-tmp.txt': 'ok',
    });
    expect(readFileSync(join(project, 'made-inside.txt'), 'utf8')).toContain('fake CLI');
    expect(existsSync(join(outside, 'escaped.txt'))).toBe(false);
    expect(existsSync('/tmp/made-in-private-tmp.txt')).toBe(false);
    expect(readFileSync(runStore, 'utf8')).not.toContain('fake CLI');
    // list and IAC.md say so too
    const listed = await s.callOk<{ agents: Job[] }>('list', {});
    expect(listed.agents.find((a) => a.agent_id === job.agent_id)?.sandbox).toBe('bwrap');
    await waitFor('IAC.md to show the run', () => readIacEntry(job.agent_id).includes('**Sandbox:** bwrap'));
  }, 90_000);

  test('an ACP agent: it writes its folder, and cannot read the home folder or write outside', async () => {
    const inside = join(project, 'acp-made-inside.txt');
    const job = await s.callOk<Job>('spawn_sandacp', {
      prompt: `[[acp:try-write ${inside}]] [[acp:try-read ${join(home, 'secret.txt')}]] [[acp:try-write ${join(outside, 'acp-escaped.txt')}]] [[acp:try-write /usr/acp-escaped.txt]]`,
      wait_s: 60,
    });
    expect(job.state, job.error).toBe('succeeded');
    expect(job.sandbox).toBe('bwrap');
    expect(job.text).toContain(`try-write ${inside}: ok`);
    expect(job.text).toContain(`try-read ${join(home, 'secret.txt')}: ENOENT`);
    expect(job.text).toContain(`try-write ${join(outside, 'acp-escaped.txt')}: ENOENT`);
    expect(job.text).toContain('try-write /usr/acp-escaped.txt: EROFS');
    expect(readFileSync(inside, 'utf8')).toBe('fake acp');
    expect(existsSync(join(outside, 'acp-escaped.txt'))).toBe(false);
  }, 90_000);

  test("the run store is not there but for the run's own folder: no token, no other run or worktree, no definitions, no keys", async () => {
    const store = join(project, '.polyspawn');
    const { job, tried } = await attempts('spawn_codex', [
      `[[cli:read:${join(store, 'http-token')}]]`,
      `[[cli:list:${store}]]`,
      `[[cli:list:${join(store, 'runs')}]]`,
      `[[cli:list:${join(store, 'worktrees')}]]`,
      `[[cli:read:${join(store, 'agents', 'offline', 'agent.md')}]]`,
      `[[cli:read:${join(project, 'api_keys.json')}]]`,
      `[[cli:try-write:${join(project, 'api_keys.json')}]]`,
      `[[cli:read:${join(project, 'store-link', 'http-token')}]]`,
      `[[cli:read:${join(project, 'home-link', 'secret.txt')}]]`,
    ]);
    expect(tried).toEqual({
      [`read:${join(store, 'http-token')}`]: 'ENOENT',
      // An empty folder, with the run's own folder bound into it.
      [`list:${store}`]: 'ok: runs',
      [`list:${join(store, 'runs')}`]: `ok: ${job.agent_id}`,
      [`list:${join(store, 'worktrees')}`]: 'ENOENT',
      [`read:${join(store, 'agents', 'offline', 'agent.md')}`]: 'ENOENT',
      // /dev/null in its place, on a mount without devices
      [`read:${join(project, 'api_keys.json')}`]: 'EACCES',
      [`try-write:${join(project, 'api_keys.json')}`]: 'EACCES',
      // A link leads where it leads in the sandbox: to the hidden store, the empty home folder.
      [`read:${join(project, 'store-link', 'http-token')}`]: 'ENOENT',
      [`read:${join(project, 'home-link', 'secret.txt')}`]: 'ENOENT',
    });
    expect(readFileSync(join(project, 'api_keys.json'), 'utf8')).toContain('xai-e2e-sandbox-key');
    // Nor is the shared server's token in its environment, even where a definition asks for it by name.
    for (const tool of ['spawn_codex', 'spawn_greedy']) {
      const env = await s.callOk<Job>(tool, { prompt: '[[cli:echo-env:POLYSPAWN_TOKEN]]', wait_s: 60 });
      expect(env.state, env.error).toBe('succeeded');
      expect(env.text).toBe('');
    }
  }, 90_000);

  test("the project's .git is read-only: git reads work, nothing the user's git later runs can be written", async () => {
    const dotGit = join(project, '.git');
    const configBefore = readFileSync(join(dotGit, 'config'), 'utf8');
    const { tried } = await attempts('spawn_codex', [
      `[[cli:try-write:${join(dotGit, 'config')}]]`,
      `[[cli:try-write:${join(dotGit, 'hooks', 'post-checkout')}]]`,
      `[[cli:try-write:${join(dotGit, 'info', 'attributes')}]]`,
      '[[cli:git:log --format=%s]]',
      '[[cli:git:status --porcelain --untracked-files=no]]',
      '[[cli:git:-c user.name=a -c user.email=b commit --allow-empty -qm planted]]',
    ]);
    expect(tried).toMatchObject({
      [`try-write:${join(dotGit, 'config')}`]: 'EROFS',
      [`try-write:${join(dotGit, 'hooks', 'post-checkout')}`]: 'EROFS',
      [`try-write:${join(dotGit, 'info', 'attributes')}`]: 'EROFS',
      'git:log --format=%s': 'ok: init',
      'git:status --porcelain --untracked-files=no': 'ok',
    });
    expect(tried['git:-c user.name=a -c user.email=b commit --allow-empty -qm planted']).toMatch(
      /Read-only file system/,
    );
    expect(readFileSync(join(dotGit, 'config'), 'utf8')).toBe(configBefore);
    expect(existsSync(join(dotGit, 'hooks', 'post-checkout'))).toBe(false);
  }, 90_000);

  test('an agent in its worktree reads git (status, diff, log); the repository, its .git file and other worktrees stay out of reach', async () => {
    const common = join(project, '.git');
    const job = await s.callOk<Job & { worktree?: { path: string; files?: string[]; uncommitted?: string[] } }>(
      'spawn_codex',
      {
        prompt: [
          'try [[cli:write:made.txt=made in the worktree]]',
          '[[cli:git:status --porcelain]]',
          '[[cli:git:log --format=%s]]',
          '[[cli:git:diff --stat HEAD]]',
          '[[cli:git:add made.txt]]',
          `[[cli:try-write:.git]]`,
          `[[cli:try-write:${join(common, 'config')}]]`,
          `[[cli:try-write:${join(common, 'refs', 'heads', 'main')}]]`,
          `[[cli:list:${join(common, 'worktrees')}]]`,
          `[[cli:list:${join(project, '.polyspawn', 'worktrees')}]]`,
        ].join(' '),
        isolation: 'worktree',
        wait_s: 60,
      },
    );
    expect(job.state, job.error).toBe('succeeded');
    const tried = JSON.parse(job.text!) as Record<string, string>;
    expect(tried).toMatchObject({
      'git:status --porcelain': 'ok: ?? made.txt',
      'git:log --format=%s': 'ok: init',
      'git:diff --stat HEAD': 'ok',
      'try-write:.git': 'EROFS',
      [`try-write:${join(common, 'config')}`]: 'EROFS',
      [`try-write:${join(common, 'refs', 'heads', 'main')}`]: 'EROFS',
      // Its own admin folder alone; its own worktree alone.
      [`list:${join(common, 'worktrees')}`]: `ok: ${job.agent_id}`,
      [`list:${join(project, '.polyspawn', 'worktrees')}`]: `ok: ${job.agent_id}`,
    });
    // Adding to the index writes an object into the repository's store: polyspawn commits what it leaves.
    expect(tried['git:add made.txt']).toMatch(/insufficient permission|Read-only file system/);
    expect(job.worktree?.uncommitted).toEqual(['made.txt']);
    expect(readFileSync(join(job.worktree!.path, '.git'), 'utf8')).toMatch(/^gitdir: /);
  }, 90_000);

  test('a link the agent leaves in its run folder is never followed by the server: no host file read back, none overwritten', async () => {
    const secret = join(home, 'secret.txt');
    const victim = join(outside, 'victim.txt');
    writeFileSync(victim, 'precious\n');
    // Its log a link to a secret of the host: the server reads the log back, the logs tool pages it.
    const read = await s.callOk<Job>('spawn_codex', {
      prompt: `try [[cli:plant-link:stdout.log=${secret}]]`,
      wait_s: 60,
    });
    const page = await s.call('logs', { agent_id: read.agent_id });
    expect(JSON.stringify(read)).not.toContain('the-home-secret');
    expect(JSON.stringify(page.content)).not.toContain('the-home-secret');
    // A link at the name of the server's next temp file (its pid guessed, here given): the record
    // written when the run ends goes through the temp file and a rename.
    const pid = s.transport.pid!;
    const written = await s.callOk<Job>('spawn_codex', {
      prompt: `try [[cli:plant-link:record.json.${pid}.tmp=${victim}]]`,
      wait_s: 60,
    });
    expect(written.state, written.error).toBe('succeeded');
    await s.callOk<Job>('result', { agent_id: written.agent_id });
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
  }, 90_000);

  test('network: false without a model API on its loopback is refused at once, for every mode', async () => {
    const job = await s.callOk<Job>('spawn_cutoff', { prompt: '[[cli:hang]]', wait_s: 60 });
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(
      /^could not start claude in sandbox docker: network: false leaves claude no way to its model API .*allow the network in this sandbox, or set ANTHROPIC_BASE_URL to a model server on the sandbox's own loopback/,
    );
  }, 90_000);

  test('network: false cannot connect to a listener on the host loopback; with the network it can', async () => {
    const listener: Server = createServer((socket) => socket.end());
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const target = `127.0.0.1:${(listener.address() as { port: number }).port}`;
    try {
      const online = await attempts('spawn_codex', [`[[cli:connect:${target}]]`]);
      expect(online.tried[`connect:${target}`]).toBe('ok');
      const agents = await s.callOk<{ agents: { name: string; sandbox?: string }[] }>('list_agents', {});
      expect(agents.agents.find((a) => a.name === 'offline')?.sandbox).toBe('bwrap (no network)');
      const offline = await attempts('spawn_offline', [`[[cli:connect:${target}]]`]);
      expect(offline.job.sandbox).toBe('bwrap (no network)');
      expect(offline.tried[`connect:${target}`]).toMatch(/^E(CONNREFUSED|NETUNREACH)$/);
    } finally {
      await new Promise((resolve) => listener.close(resolve));
    }
  }, 90_000);

  test('the channel to the orchestrator works from inside; without network the run has none', async () => {
    const online = await s.callOk<Job & { conversation?: { kind: string; text: string }[] }>('spawn_codex', {
      prompt: 'report [[cli:progress:working in a sandbox]]',
      wait_s: 60,
    });
    expect(online.text).toBe('TALKED');
    expect(online.conversation).toMatchObject([{ kind: 'progress', text: 'working in a sandbox' }]);
    const offline = await s.callOk<Job>('spawn_offline', { prompt: 'report [[cli:progress:x]]', wait_s: 60 });
    expect(offline.text).toBe('NO CHANNEL');
    expect(s.stderr()).toContain(`agent ${offline.agent_id} runs without ask_parent: its sandbox has no network`);
  }, 90_000);

  test('cancel ends the sandbox and the grandchild the agent started in it', async () => {
    const pidFile = join(project, 'grandchild.pid');
    const job = await s.callOk<Job>('spawn_codex', { prompt: `[[cli:grandchild:${pidFile}]]` });
    await waitFor('the grandchild to start', () => existsSync(pidFile), 30_000);
    // Its pid in the file is the sandbox's own; on the host it is the marked `node -e setInterval` process.
    const grandchild = markedProcesses().find((pid) => cmdline(pid).includes('setInterval'));
    expect(grandchild).toBeDefined();
    const wrappers = markedProcesses().filter(isBwrap);
    expect(wrappers.length).toBeGreaterThan(0);
    const started = Date.now();
    expect((await s.callOk<Job>('cancel', { agent_id: job.agent_id })).state).toBe('cancelled');
    await waitGone(grandchild!, 30_000);
    for (const pid of wrappers) await waitGone(pid, 30_000);
    expect(Date.now() - started).toBeLessThan(20_000);
  }, 90_000);

  test('a time-out ends it', async () => {
    const job = await s.callOk<Job>('spawn_codex', { prompt: '[[cli:hang]]', timeout_s: 1, wait_s: 60 });
    expect(job.state).toBe('timed_out');
    expect(markedProcesses().filter(isBwrap)).toEqual([]);
  }, 90_000);

  test('where the config lets callers choose, the CLI spawn tools list a sandbox field by its type alone', async () => {
    const { tools } = await s.client.listTools();
    const properties = (name: string) =>
      (tools.find((t) => t.name === name)?.inputSchema.properties ?? {}) as Record<string, unknown>;
    expect(properties('spawn_codex').sandbox).toEqual({ type: 'string' });
    // An API agent runs no process: nothing to sandbox.
    expect(Object.keys(properties('spawn_grok'))).toContain('prompt');
    expect(properties('spawn_grok').sandbox).toBeUndefined();
  });

  test('a caller cannot turn off the sandbox the config set', async () => {
    const result = await s.call('spawn_codex', { prompt: 'x', sandbox: 'none' });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toMatch(/runs codex in bwrap .*cannot turn it off/);
  });
});

describe('docker and podman (a fake engine)', () => {
  const calls = () =>
    readFileSync(join(engineDir, 'calls.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { engine: string; argv: string[] });

  test('run --rm of the image, named after the run, environment by name only', async () => {
    const job = await s.callOk<Job>('spawn_claude', {
      prompt: 'hello [[cli:echo-env:POLYSPAWN_PARENT_TOKEN]]',
      wait_s: 60,
    });
    expect(job.state, job.error).toBe('succeeded');
    expect(job.sandbox).toBe('docker');
    // The agent had the channel's token (redacted in its answer), from its environment.
    expect(job.text).toBe('[REDACTED]');
    const run = calls().find((c) => c.argv[0] === 'run' && c.argv.join(' ').includes(job.agent_id))!;
    expect(run.engine).toBe('docker');
    expect(run.argv.slice(0, 7)).toEqual(['run', '--rm', '-i', '--init', '--pull', 'never', '--name']);
    expect(run.argv[7]).toMatch(new RegExp(`^polyspawn-${job.agent_id}-[0-9a-f]{8}$`));
    expect(run.argv).toContain(`${project}:${project}`);
    // The same hiding as bwrap's, through the mounts: the store an empty tmpfs but for the run's
    // folder, the keys file /dev/null, the repository's .git read-only.
    const store = join(project, '.polyspawn');
    const runDir = join(store, 'runs', job.agent_id);
    expect(run.argv.join(' ')).toContain(`--tmpfs ${store}`);
    expect(run.argv.indexOf(`${runDir}:${runDir}`)).toBeGreaterThan(run.argv.indexOf(store));
    expect(run.argv).toContain(`/dev/null:${join(project, 'api_keys.json')}:ro`);
    expect(run.argv).toContain(`${join(project, '.git')}:${join(project, '.git')}:ro`);
    expect(run.argv.join(' ')).toContain('-e POLYSPAWN_PARENT_TOKEN');
    expect(run.argv.join(' ')).not.toMatch(/psp_/);
    expect(run.argv).not.toContain('PATH');
    const image = run.argv.indexOf('example.org/agents:1');
    expect(run.argv[image + 1]).toBe('claude');
  }, 90_000);

  test('podman: cancel removes the container by name', async () => {
    const job = await s.callOk<Job>('spawn_claude', { prompt: '[[cli:hang]]', sandbox: 'podman' });
    await waitFor('the container to start', () => calls().some((c) => c.argv.join(' ').includes(job.agent_id)), 30_000);
    expect((await s.callOk<Job>('cancel', { agent_id: job.agent_id })).state).toBe('cancelled');
    const mine = () => calls().filter((c) => c.argv.join(' ').includes(job.agent_id));
    await waitFor('the kill', () => mine().length === 2, 30_000);
    expect(mine().map((c) => [c.engine, c.argv[0]])).toEqual([
      ['podman', 'run'],
      ['podman', 'rm'],
    ]);
  }, 90_000);

  test('a restart removes the container a killed server left behind', async () => {
    const projectDir = mkdtempSync(join(tmpdir(), 'polyspawn-sandbox-restart-'));
    const first = await startServer({ projectDir, env: serverEnv });
    const job = await first.callOk<Job>('spawn_claude', { prompt: '[[cli:hang]]' });
    const ofJob = (command: string) =>
      calls().find((c) => c.argv[0] === command && c.argv.join(' ').includes(job.agent_id));
    await waitFor('the container to start', () => ofJob('run') !== undefined, 30_000);
    const name = ofJob('run')!.argv[7]!;
    process.kill(first.transport.pid!, 'SIGKILL');
    await first.close().catch(() => undefined);
    // A real engine's container outlives its client: the next server removes it by name.
    const second = await startServer({ projectDir, env: serverEnv });
    try {
      await waitFor('the leftover container removed', () => ofJob('rm') !== undefined, 30_000);
      expect(ofJob('rm')).toEqual({ engine: 'docker', argv: ['rm', '-f', name] });
      expect((await second.callOk<Job>('result', { agent_id: job.agent_id })).state).toBe('interrupted');
    } finally {
      await second.close();
      rmSync(projectDir, { recursive: true, force: true });
    }
  }, 90_000);
});

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

const isBwrap = (pid: number) => cmdline(pid).split(' ')[0]!.endsWith('/bwrap');

/** IAC.md from the run's heading on ('' while it is not there). */
function readIacEntry(id: string): string {
  const text = existsSync(join(project, 'IAC.md')) ? readFileSync(join(project, 'IAC.md'), 'utf8') : '';
  const start = text.indexOf(`### \`${id}\``);
  return start < 0 ? '' : text.slice(start);
}
