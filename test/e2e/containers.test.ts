// CLI agents in real containers, on each engine that answers here (docker's dockerd, podman): the
// agent image is built here (test/helpers/engines.ts: node, sh and the fake CLI, no registry), and
// the host has no CLI on the server's PATH at all. What bwrap promises holds in the container
// (the fake CLI tries to get out), the channel reaches the server, cancel, time-out and a dead
// server leave no container, and the engine's faults are said plainly. Under CI an engine that
// does not answer fails the run (vitest.config.ts); elsewhere its tests skip, said in one line.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import which from 'which';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { agentImage, containersIn, engineAnswers, ENGINES, type Engine } from '../helpers/engines.js';
import { jobOnceEnded, startServer, type TestServer } from '../helpers/mcp.js';
import { killReaper } from '../helpers/rpc.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

type Job = { agent_id: string; state: string; text?: string; error?: string; sandbox?: string };

/** The host's PATH: the engines' clients and node, and no vendor CLI. */
const HOST_PATH = '/usr/local/bin:/usr/bin:/bin';

describe.each(ENGINES)('%s, a real engine', (engine: Engine) => {
  const up = engineAnswers(engine);
  let s: TestServer;
  let root: string;
  let project: string;
  let home: string;
  let serverEnv: Record<string, string>;
  let listener: Server;
  let port: number;
  const containers = () => containersIn(engine, [root]);

  beforeAll(async () => {
    if (!up) return;
    root = tempDir(`containers-${engine}`);
    home = join(root, 'home');
    project = join(root, 'project');
    const other = join(root, 'other-project');
    for (const dir of [join(home, '.ssh'), join(home, '.claude'), project, other]) mkdirSync(dir, { recursive: true });
    writeFileSync(join(home, '.ssh', 'id_ed25519'), 'the-private-key\n');
    writeFileSync(join(home, '.claude', 'login.json'), '{"signed":"in"}\n');
    writeFileSync(join(other, 'theirs.txt'), 'another project\n');
    writeFileSync(join(project, 'api_keys.json'), '{"XAI_API_KEY": "xai-e2e-container-key-0123456789"}\n');
    const image = await agentImage(engine);
    const bare = await agentImage(engine, false);
    const config = join(root, 'config.json');
    writeFileSync(
      config,
      JSON.stringify({
        backends: {
          claude: { sandbox: { mode: engine, image } },
          // No network: pointed at a model server on the container's own loopback (the fake asks none).
          codex: { sandbox: { mode: engine, image, network: false } },
          boxacp: { sandbox: { mode: engine, image } },
        },
        // An ACP agent (the fake one, in the image) in a container like any CLI agent.
        acp_agents: { boxacp: { command: 'node', args: ['/opt/fakes/fake-acp-agent.mjs'], start_timeout_s: 60 } },
      }),
    );
    const agent = (name: string, sandboxImage: string) => {
      mkdirSync(join(project, '.polyspawn', 'agents', name), { recursive: true });
      writeFileSync(
        join(project, '.polyspawn', 'agents', name, 'agent.md'),
        `---\ndescription: In ${sandboxImage}.\nbackend: claude\nsandbox: { mode: ${engine}, image: ${sandboxImage} }\n---\nYou work.\n`,
      );
    };
    agent('bare', bare);
    agent('absent', 'polyspawn-test/absent:1');
    // podman as root raises the container's open-files and process limits past what this machine
    // lets a process raise them to: the tests' engine config keeps them within.
    const containersConf = join(root, 'containers.conf');
    writeFileSync(containersConf, '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n');
    serverEnv = {
      HOME: home,
      PATH: HOST_PATH,
      POLYSPAWN_CONFIG: config,
      OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
      CONTAINERS_CONF: containersConf,
    };
    listener = createServer((socket) => socket.end());
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    port = (listener.address() as { port: number }).port;
    spawnSync('git', ['init', '-q'], { cwd: project });
    s = await startServer({ projectDir: project, env: serverEnv, fakeClis: false });
  }, 300_000);
  afterAll(async () => {
    await s?.close();
    listener?.close();
  });

  const spawnAndWait = async (tool: string, prompt: string, extra: Record<string, unknown> = {}) =>
    s.callOk<Job>(tool, { prompt, wait_s: 90, ...extra });
  const ended = (id: string) => jobOnceEnded<Job>(s, id, 60_000);
  const attempts = async (tool: string, directives: string[]) => {
    const job = await spawnAndWait(tool, `try ${directives.join(' ')}`);
    expect(job.state, job.error).toBe('succeeded');
    return { job, tried: JSON.parse(job.text!) as Record<string, string> };
  };

  test.skipIf(!up)(
    'the host has no CLI: the agent runs in the image, sees its folder, its run folder and login folder, and nothing else of the host',
    async () => {
      expect(which.sync('claude', { path: HOST_PATH, nothrow: true })).toBeNull();
      const made = join(project, 'made-inside.txt');
      const { job, tried } = await attempts('spawn_claude', [
        `[[cli:try-write:${made}]]`,
        `[[cli:read:${join(home, '.claude', 'login.json')}]]`,
        `[[cli:list:${home}]]`,
        `[[cli:read:${join(home, '.ssh', 'id_ed25519')}]]`,
        `[[cli:read:${join(root, 'other-project', 'theirs.txt')}]]`,
        `[[cli:read:${join(project, 'api_keys.json')}]]`,
        `[[cli:read:${join(project, '.polyspawn', 'index.jsonl')}]]`,
        `[[cli:read:${join(project, '.polyspawn', 'agents', 'bare', 'agent.md')}]]`,
        `[[cli:connect:127.0.0.1:${port}]]`,
        '[[cli:read:/proc/self/status]]',
      ]);
      expect(job.sandbox).toBe(engine);
      // Root in it (as CI runs) keeps no capability: the host's network is shared, its traffic not readable.
      expect(tried['read:/proc/self/status']).toMatch(/CapEff:\s+0{16}\b/);
      expect(tried['read:/proc/self/status']).toMatch(/NoNewPrivs:\s+1\b/);
      delete tried['read:/proc/self/status'];
      expect(tried).toEqual({
        [`try-write:${made}`]: 'ok',
        [`read:${join(home, '.claude', 'login.json')}`]: 'ok: {"signed":"in"}',
        // the CLI's login folder, and nothing else of the home folder
        [`list:${home}`]: 'ok: .claude',
        [`read:${join(home, '.ssh', 'id_ed25519')}`]: 'ENOENT',
        [`read:${join(root, 'other-project', 'theirs.txt')}`]: 'ENOENT',
        // the key file is /dev/null; the store an empty tmpfs but for the run's own folder
        [`read:${join(project, 'api_keys.json')}`]: 'ok',
        [`read:${join(project, '.polyspawn', 'index.jsonl')}`]: 'ENOENT',
        [`read:${join(project, '.polyspawn', 'agents', 'bare', 'agent.md')}`]: 'ENOENT',
        // the network is on: the host's own (its loopback included)
        [`connect:127.0.0.1:${port}`]: 'ok',
      });
      // Written as the user's uid, in the user's project.
      expect(readFileSync(made, 'utf8')).toContain('fake CLI');
      expect(statSync(made).uid).toBe(process.getuid!());
      await waitFor('its container removed', () => containers().length === 0, 30_000);
    },
    120_000,
  );

  test.skipIf(!up)(
    'an ACP agent in the image: its folder writable, the home and another project not there',
    async () => {
      const inside = join(project, 'acp-inside.txt');
      const ssh = join(home, '.ssh', 'id_ed25519');
      const theirs = join(root, 'other-project', 'theirs.txt');
      const job = await spawnAndWait(
        'spawn_boxacp',
        `[[acp:try-write ${inside}]] [[acp:try-read ${ssh}]] [[acp:try-read ${theirs}]] [[acp:try-write /usr/acp-escaped.txt]]`,
      );
      expect(job.state, job.error).toBe('succeeded');
      expect(job.sandbox).toBe(engine);
      expect(job.text).toContain(`try-write ${inside}: ok`);
      expect(job.text).toContain(`try-read ${ssh}: ENOENT`);
      expect(job.text).toContain(`try-read ${theirs}: ENOENT`);
      // The image's own /usr, gone with the container: the host's is untouched.
      expect(existsSync('/usr/acp-escaped.txt')).toBe(false);
      expect(readFileSync(inside, 'utf8')).toBe('fake acp');
      expect(statSync(inside).uid).toBe(process.getuid!());
      await waitFor('its container removed', () => containers().length === 0, 30_000);
    },
    120_000,
  );

  test.skipIf(!up)(
    'network: false: the host, its loopback included, is out of reach',
    async () => {
      const { job, tried } = await attempts('spawn_codex', [`[[cli:connect:127.0.0.1:${port}]]`]);
      expect(job.sandbox).toBe(`${engine} (no network)`);
      expect(tried[`connect:127.0.0.1:${port}`]).toBe('ECONNREFUSED');
    },
    120_000,
  );

  // claude is given the channel (its URL and the token's variable) in a file in the run's folder:
  // mounted, read in the container.
  test.skipIf(!up)(
    'the per-run channel reaches the server from the container, with its token',
    async () => {
      const job = await s.callOk<Job>('spawn_claude', { prompt: '[[cli:ask:Which engine?]]' });
      await waitFor(
        'the question',
        async () =>
          (await s.callOk<{ agents: (Job & { waiting_for_parent?: boolean })[] }>('list')).agents.some(
            (a) => a.agent_id === job.agent_id && a.waiting_for_parent,
          ),
        60_000,
      );
      await s.callOk('reply_subagent', { agent_id: job.agent_id, message_id: 'q1', answer: engine });
      const done = await ended(job.agent_id);
      expect(done.state, done.error).toBe('succeeded');
      expect(done.text).toBe(`ANSWER ${engine}`);
    },
    120_000,
  );

  test.skipIf(!up)(
    'cancel and time-out remove the container',
    async () => {
      const cancelled = await s.callOk<Job>('spawn_claude', { prompt: 'cancel me [[cli:hang]]' });
      await waitFor('its container', () => containers().length === 1, 60_000);
      expect((await s.callOk<Job>('cancel', { agent_id: cancelled.agent_id })).state).toBe('cancelled');
      await waitFor('its container removed', () => containers().length === 0, 30_000);

      const timedOut = await spawnAndWait('spawn_claude', 'time me out [[cli:hang]]', { timeout_s: 5 });
      expect(timedOut.state).toBe('timed_out');
      await waitFor('its container removed', () => containers().length === 0, 30_000);
    },
    180_000,
  );

  test.skipIf(!up)(
    'a container killed under the agent: the job fails saying so, nothing left',
    async () => {
      const job = await s.callOk<Job>('spawn_claude', { prompt: 'kill my container [[cli:hang]]' });
      await waitFor('its container', () => containers().length === 1, 60_000);
      spawnSync(engine, ['kill', containers()[0]!]);
      const done = await ended(job.agent_id);
      expect(done.state).toBe('failed');
      expect(done.error).toMatch(/^its container was killed \(exit 137/);
      await waitFor('its container removed', () => containers().length === 0, 30_000);
    },
    120_000,
  );

  test.skipIf(!up)(
    'an image without the CLI, and an image not on the engine: failed at once, saying what to do',
    async () => {
      const bare = await spawnAndWait('spawn_bare', 'hello');
      expect(bare.state).toBe('failed');
      expect(bare.error).toMatch(
        /^the image polyspawn-test\/bare:\w+ cannot run `claude` \(.+\): install the CLI in the image, on its PATH, or name an image that has it/,
      );
      // Never pulled (no registry answers here): said at once, not waited on.
      const absent = await spawnAndWait('spawn_absent', 'hello');
      expect(absent.state).toBe('failed');
      expect(absent.error).toMatch(
        new RegExp(
          `^the image polyspawn-test/absent:1 is not on this ${engine} engine \\(.+\\), and polyspawn does not pull one while an agent waits: \`${engine} pull polyspawn-test/absent:1\``,
        ),
      );
      expect(containers()).toEqual([]);
    },
    120_000,
  );

  test.skipIf(!up)(
    'doctor checks the image, not the host',
    async () => {
      const doctor = spawnSync(process.execPath, [join(import.meta.dirname, '../../dist/src/cli.js'), 'doctor'], {
        cwd: project,
        env: { ...process.env, ...serverEnv, XDG_CONFIG_HOME: join(project, '.xdg-config') },
        encoding: 'utf8',
        timeout: 90_000,
      });
      const line = (name: string) => doctor.stdout.split('\n').find((l) => l.startsWith(`${name} `)) ?? doctor.stdout;
      expect(line('claude')).toMatch(
        new RegExp(`ok .*\`claude\` in the ${engine} image polyspawn-test/agent:\\w+, 0\\.0\\.0-fake \\(claude\\)`),
      );
    },
    120_000,
  );

  test.skipIf(!up)(
    'a server that died leaves no container after the next start',
    async () => {
      const projectDir = tempDir(`containers-restart-${engine}`);
      const first = await startServer({ projectDir, env: serverEnv, fakeClis: false });
      const mine = () => containersIn(engine, [projectDir]);
      const job = await first.callOk<Job>('spawn_claude', { prompt: 'outlive my server [[cli:hang]]' });
      await waitFor('its container', () => mine().length === 1, 60_000);
      // Its reaper too, as a crash of the machine would: else the reaper ends the engine's client,
      // and docker may remove the container before the next start has anything to do.
      await killReaper(first.transport.pid!);
      process.kill(first.transport.pid!, 'SIGKILL');
      await first.close().catch(() => undefined);
      // dockerd keeps a container whose client is gone (podman's may end with it); the next server removes it.
      if (engine === 'docker') expect(mine()).toHaveLength(1);
      const second = await startServer({ projectDir, env: serverEnv, fakeClis: false });
      try {
        await waitFor('the leftover container removed', () => mine().length === 0, 60_000);
        expect((await second.callOk<Job>('result', { agent_id: job.agent_id })).state).toBe('interrupted');
      } finally {
        await second.close();
      }
    },
    180_000,
  );

  test.skipIf(!up)(
    'a worktree agent in the container: its branch comes back as polyspawn/<id>, and integrate merges it',
    async () => {
      const projectDir = tempDir(`containers-worktree-${engine}`);
      const git = (...args: string[]) =>
        spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
          cwd: projectDir,
          encoding: 'utf8',
        });
      git('init', '-q', '-b', 'main');
      writeFileSync(join(projectDir, 'README.md'), 'the project\n');
      git('add', '-A');
      git('commit', '-q', '-m', 'the base');
      const server = await startServer({ projectDir, env: serverEnv, fakeClis: false });
      try {
        const job = await server.callOk<Job & { worktree?: { branch: string; files?: string[] } }>('spawn_claude', {
          prompt: '[[cli:write:feature.txt=made in the container]]',
          isolation: 'worktree',
          wait_s: 90,
        });
        expect(job.state, job.error).toBe('succeeded');
        expect(job.sandbox).toBe(engine);
        expect(job.worktree).toMatchObject({ branch: `polyspawn/${job.agent_id}`, files: ['feature.txt'] });
        expect(existsSync(join(projectDir, 'feature.txt'))).toBe(false);
        expect(await server.callOk('integrate', { agent_id: job.agent_id, how: 'merge' })).toMatchObject({
          how: 'merge',
          files: ['feature.txt'],
        });
        expect(readFileSync(join(projectDir, 'feature.txt'), 'utf8')).toContain('made in the container');
        expect(git('log', '--format=%s', '-3').stdout).toMatch(/^Merge .*polyspawn\//);
      } finally {
        await server.close();
      }
    },
    180_000,
  );

  test.skipIf(!up)(
    "two servers on one engine: a server's start removes its own dead server's container, never another's",
    async () => {
      const running = await s.callOk<Job>('spawn_claude', { prompt: 'keep running [[cli:hang]]' });
      await waitFor('its container', () => containers().length === 1, 60_000);
      const mine = containers();
      const otherProject = tempDir(`containers-other-${engine}`);
      const theirs = () => containersIn(engine, [otherProject]);
      const dead = await startServer({ projectDir: otherProject, env: serverEnv, fakeClis: false });
      await dead.callOk<Job>('spawn_claude', { prompt: 'outlive my server [[cli:hang]]' });
      await waitFor('its container', () => theirs().length === 1, 60_000);
      await killReaper(dead.transport.pid!);
      process.kill(dead.transport.pid!, 'SIGKILL');
      await dead.close().catch(() => undefined);
      const next = await startServer({ projectDir: otherProject, env: serverEnv, fakeClis: false });
      try {
        // The other project's server has cleaned up after its own: this one's container is untouched.
        await waitFor("the other server's leftover removed", () => theirs().length === 0, 60_000);
        expect(containers()).toEqual(mine);
        expect((await s.callOk<Job>('result', { agent_id: running.agent_id })).state).toBe('running');
      } finally {
        await next.close();
      }
      expect((await s.callOk<Job>('cancel', { agent_id: running.agent_id })).state).toBe('cancelled');
      await waitFor('its container removed', () => containers().length === 0, 30_000);
    },
    240_000,
  );
});

describe.skipIf(!engineAnswers('docker'))('docker, an engine that is down', () => {
  test('the job fails at once, saying no engine answers', async () => {
    const root = tempDir('containers-down');
    const config = join(root, 'config.json');
    writeFileSync(
      config,
      JSON.stringify({ backends: { claude: { sandbox: { mode: 'docker', image: 'any/image:1' } } } }),
    );
    const server = await startServer({
      projectDir: root,
      env: { PATH: HOST_PATH, POLYSPAWN_CONFIG: config, DOCKER_HOST: `unix://${join(root, 'no-engine.sock')}` },
      fakeClis: false,
    });
    try {
      const job = await server.callOk<Job>('spawn_claude', { prompt: 'hello', wait_s: 60 });
      expect(job.state).toBe('failed');
      expect(job.error).toMatch(/^no docker engine answers \(.*no-engine\.sock.*\): start it/);
      expect(existsSync(join(root, 'no-engine.sock'))).toBe(false);
    } finally {
      await server.close();
    }
  }, 120_000);
});
