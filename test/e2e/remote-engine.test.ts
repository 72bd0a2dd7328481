// A CLI agent on a container engine that shares no files with this machine, as one on another host
// would: a second dockerd (test/helpers/engines.ts's SECOND_DOCKER: its own socket, data and exec
// roots), reached only through its socket by `engine: { host, shares_files: false }`. Nothing is
// bind-mounted: the agent gets the project as its branch, its commits come back as polyspawn/<id>
// and integrate merges them into the user's checkout. Its faults (a branch that cannot be taken, a
// killed container, an image not there, an engine that does not answer, one that never gives the
// work back) are said plainly and leave no container running; work not copied out stays in its
// container, named. The same engine used as one that shares this machine's files (it runs here, so
// bind mounts work) is restarted under an agent in the bind-mount mode. Under CI an engine that cannot start fails the run (vitest.config.ts, TOOLS); elsewhere
// these tests skip, said in one line.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  agentImage,
  containersIn,
  restartSecondDockerd,
  SECOND_DOCKER,
  startSecondDockerd,
} from '../helpers/engines.js';
import { jobOnceEnded, startServer, type TestServer } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

type Job = {
  agent_id: string;
  state: string;
  text?: string;
  error?: string;
  sandbox?: string;
  worktree?: { branch: string; files?: string[]; base: string };
};

const HOST_PATH = '/usr/local/bin:/usr/bin:/bin';
const up = startSecondDockerd();
const docker2 = (...args: string[]) =>
  spawnSync('docker', ['-H', SECOND_DOCKER, ...args], { encoding: 'utf8', timeout: 60_000 });
const running = (name: string) => docker2('inspect', '--format', '{{.State.Running}}', name).stdout.trim() === 'true';
const git = (cwd: string, ...args: string[]) =>
  spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' });

describe.skipIf(!up)('docker on an engine that shares no files (a second dockerd, through its socket)', () => {
  let s: TestServer;
  let root: string;
  let project: string;
  let home: string;
  let slowEngine: Server;
  let stallingEngine: Server;
  const containers = () => containersIn('docker', [root], SECOND_DOCKER);

  beforeAll(async () => {
    root = tempDir('remote-engine');
    home = join(root, 'home');
    project = join(root, 'project');
    for (const dir of [join(home, '.ssh'), join(home, '.claude'), project]) mkdirSync(dir, { recursive: true });
    writeFileSync(join(home, '.ssh', 'id_ed25519'), 'the-private-key\n');
    writeFileSync(join(home, '.claude', 'login.json'), '{"signed":"in"}\n');
    git(project, 'init', '-q', '-b', 'main');
    writeFileSync(join(project, 'README.md'), 'the project\n');
    git(project, 'add', '-A');
    git(project, 'commit', '-q', '-m', 'the base');
    // Built in the second engine itself, as the container tests build theirs (no registry).
    const image = await agentImage('docker', true, SECOND_DOCKER);
    const engine = { host: SECOND_DOCKER, shares_files: false };
    const config = join(root, 'config.json');
    writeFileSync(config, JSON.stringify({ backends: { claude: { sandbox: { mode: 'docker', image, engine } } } }));
    const agent = (name: string, sandbox: string) => {
      // The user's own agents: a project's may not name an engine.
      mkdirSync(join(home, '.config', 'polyspawn', 'agents', name), { recursive: true });
      writeFileSync(
        join(home, '.config', 'polyspawn', 'agents', name, 'agent.md'),
        `---\ndescription: ${name}.\nbackend: claude\nsandbox: ${sandbox}\n---\nYou work.\n`,
      );
    };
    agent(
      'absent',
      `{ mode: docker, image: polyspawn-test/absent:1, engine: { host: "${SECOND_DOCKER}", shares_files: false } }`,
    );
    agent(
      'nowhere',
      `{ mode: docker, image: ${image}, engine: { host: "unix://${join(root, 'no-engine.sock')}", shares_files: false } }`,
    );
    // An engine that takes the connection and never answers, on either path (files shared or not).
    slowEngine = createServer(() => undefined);
    await new Promise<void>((resolve) => slowEngine.listen(join(root, 'slow-engine.sock'), resolve));
    for (const [name, shares] of [
      ['slowlocal', true],
      ['slowremote', false],
    ] as const)
      agent(
        name,
        `{ mode: docker, image: ${image}, engine: { host: "unix://${join(root, 'slow-engine.sock')}", shares_files: ${shares} } }`,
      );
    // The second engine, but a copy out of a container (`cp <container>:<path> -`, a GET of its
    // archive) is taken and never answered.
    stallingEngine = createServer({ allowHalfOpen: true }, (client) => stallCopyOut(client));
    await new Promise<void>((resolve) => stallingEngine.listen(join(root, 'stalling-engine.sock'), resolve));
    agent(
      'stallout',
      `{ mode: docker, image: ${image}, engine: { host: "unix://${join(root, 'stalling-engine.sock')}", shares_files: false } }`,
    );
    // The second engine as one that shares this machine's files: the agent's folder bind-mounted.
    agent('sharing', `{ mode: docker, image: ${image}, engine: { host: "${SECOND_DOCKER}", shares_files: true } }`);
    s = await startServer({
      projectDir: project,
      env: { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), PATH: HOST_PATH, POLYSPAWN_CONFIG: config },
      fakeClis: false,
    });
  }, 300_000);
  afterAll(async () => {
    await s?.close();
    slowEngine?.close();
    stallingEngine?.close();
    const left = containersIn('docker', [root], SECOND_DOCKER);
    if (left.length) docker2('rm', '-f', ...left);
  });

  const ended = (id: string) => jobOnceEnded<Job>(s, id, 90_000);

  test('the agent works on its branch in the container, with none of this machine mounted; the branch comes back and integrates', async () => {
    const job = await s.callOk<Job>('spawn_claude', {
      prompt: [
        '[[cli:write:feature.txt=made in the container]]',
        '[[cli:commit:the agent adds a feature]]',
        `[[cli:read:${join(home, '.claude', 'login.json')}]]`,
        `[[cli:read:${join(home, '.ssh', 'id_ed25519')}]]`,
        `[[cli:read:${join(project, 'README.md')}]]`,
        '[[cli:read:README.md]]',
        '[[cli:git:log --format=%s]]',
      ].join(' '),
      wait_s: 120,
    });
    expect(job.state, job.error).toBe('succeeded');
    expect(job.sandbox).toBe(`docker (an engine sharing no files: ${SECOND_DOCKER})`);
    expect(JSON.parse(job.text!)).toEqual({
      // the login folder, copied in; nothing else of the home folder, not the user's checkout
      [`read:${join(home, '.claude', 'login.json')}`]: 'ok: {"signed":"in"}',
      [`read:${join(home, '.ssh', 'id_ed25519')}`]: 'ENOENT',
      [`read:${join(project, 'README.md')}`]: 'ENOENT',
      // the project at its base, as a clone of the branch
      'read:README.md': 'ok: the project',
      'git:log --format=%s': 'ok: the agent adds a feature\nthe base',
    });
    const branch = `polyspawn/${job.agent_id}`;
    expect(job.worktree).toMatchObject({ branch, files: ['feature.txt'] });
    expect(git(project, 'log', '--format=%s', branch).stdout).toBe('the agent adds a feature\nthe base\n');
    // The user's checkout is untouched until integrate merges the branch into it.
    expect(existsSync(join(project, 'feature.txt'))).toBe(false);
    const merged = await s.callOk('integrate', { agent_id: job.agent_id, how: 'merge' });
    expect(merged).toMatchObject({ how: 'merge', files: ['feature.txt'], removed: true });
    expect(readFileSync(join(project, 'feature.txt'), 'utf8')).toBe('made in the container\n');
    expect(containers()).toEqual([]);
  }, 180_000);

  test('its container mounts nothing, its log streams back while it runs, and cancel removes it', async () => {
    const job = await s.callOk<Job>('spawn_claude', {
      prompt: '[[cli:stderr:said in the container]] cancel me [[cli:hang]]',
    });
    await waitFor('its container', () => containers().length === 1, 90_000);
    const [name] = containers();
    expect(JSON.parse(docker2('inspect', '--format', '{{json .Mounts}}', name!).stdout)).toEqual([]);
    expect(docker2('inspect', '--format', '{{json .HostConfig.Binds}}', name!).stdout.trim()).toBe('null');
    await waitFor(
      'its log, while it runs',
      async () =>
        JSON.stringify(await s.callOk('logs', { agent_id: job.agent_id, stream: 'stderr' })).includes(
          'said in the container',
        ),
      60_000,
    );
    expect((await s.callOk<Job>('cancel', { agent_id: job.agent_id })).state).toBe('cancelled');
    await waitFor('its container removed', () => containers().length === 0, 30_000);
  }, 180_000);

  test('a branch that does not descend from its base is not taken: failed, saying why and where the work is', async () => {
    const job = await s.callOk<Job>('spawn_claude', {
      prompt: '[[cli:git:checkout -q --orphan rewritten]] [[cli:write:other.txt=unrelated history]]',
      wait_s: 120,
    });
    expect(job.state).toBe('failed');
    const kept = /the bundle is kept: (\S+)\)$/.exec(job.error ?? '')?.[1];
    expect(job.error).toMatch(
      new RegExp(
        `^the branch its container sent back was not taken: refs/heads/polyspawn/${job.agent_id} does not descend from the job's base`,
      ),
    );
    expect(kept && existsSync(kept)).toBe(true);
    expect(git(project, 'rev-parse', '--verify', '--quiet', `polyspawn/${job.agent_id}~1`).status).not.toBe(0);
    expect(containers()).toEqual([]);
  }, 180_000);

  test('work that cannot be copied out (a folder where its bundle goes): failed, and the container kept, named', async () => {
    const job = await s.callOk<Job>('spawn_claude', { prompt: 'answer late [[cli:sleep:8000]]' });
    await waitFor('its container, running', () => containers().some(running), 90_000);
    const [name] = containers();
    const bundle = join(project, '.polyspawn', 'runs', job.agent_id, 'result.bundle');
    // What the agent could do in its container: the path its bundle is copied from made a folder.
    const planted = docker2('exec', name!, 'node', '-e', `require('fs').mkdirSync(${JSON.stringify(bundle)})`);
    expect(planted.status, planted.stderr).toBe(0);
    const done = await ended(job.agent_id);
    expect(done.state).toBe('failed');
    expect(done.error).toContain(`result.bundle in the container is not a regular file (a link, a folder): not taken`);
    expect(done.error).toContain(`the container ${name} is kept on the docker engine at ${SECOND_DOCKER}`);
    expect(done.error).toContain(`\`docker -H ${SECOND_DOCKER} cp ${name}:`);
    expect(containers()).toEqual([name]);
    expect(existsSync(bundle)).toBe(false);
    docker2('rm', '-f', name!);
  }, 180_000);

  test('a container killed under the agent: failed saying so, nothing left', async () => {
    const job = await s.callOk<Job>('spawn_claude', { prompt: 'kill my container [[cli:hang]]' });
    // Made and given its work first, then started: killed once it runs.
    await waitFor('its container, running', () => containers().some(running), 90_000);
    expect(docker2('kill', containers()[0]!).status).toBe(0);
    const done = await ended(job.agent_id);
    expect(done.state).toBe('failed');
    expect(done.error).toMatch(/^its container was killed \(exit 137/);
    await waitFor('its container removed', () => containers().length === 0, 30_000);
  }, 180_000);

  test('the engine restarted under the agent: failed saying so; its container kept and named, its work not lost', async () => {
    const job = await s.callOk<Job>('spawn_claude', { prompt: 'outlive my engine [[cli:hang]]' });
    await waitFor('its container, running', () => containers().some(running), 90_000);
    const [container] = containers();
    await restartSecondDockerd();
    const done = await ended(job.agent_id);
    // The engine stopped the container and went away while the run ended: its branch could not be
    // copied out, so the container is kept (with the work in it) and named, with what to do.
    expect(done.state).toBe('failed');
    expect(done.error).toMatch(
      new RegExp(
        `^its work could not be copied out of its container .*: the container ${container} is kept on the docker engine`,
      ),
    );
    expect(done.error).toContain(`rm ${container}`);
    // Back up, the engine still has it, stopped.
    expect(docker2('inspect', container!).status).toBe(0);
    expect(running(container!)).toBe(false);
    docker2('rm', '-f', container!);
  }, 240_000);

  test('an engine that never answers: the job times out (a clear state, no hang), and the server serves on', async () => {
    const local = await s.callOk<Job>('spawn_slowlocal', { prompt: 'hello', timeout_s: 5, wait_s: 120 });
    expect(local.state, local.error).toBe('timed_out');
    // Made and given its work within the job's time-out, or not at all.
    const remote = await s.callOk<Job>('spawn_slowremote', { prompt: 'hello', timeout_s: 5, wait_s: 120 });
    expect(remote.state, remote.error).toBe('timed_out');
    expect(remote.error).toMatch(
      /the docker engine did not make the container and take its work within the job's time-out/,
    );
    expect((await s.callOk<{ agents: Job[] }>('list')).agents.length).toBeGreaterThan(0);
  }, 300_000);

  test('time-out removes the container', async () => {
    const job = await s.callOk<Job>('spawn_claude', { prompt: 'time me out [[cli:hang]]', timeout_s: 8, wait_s: 120 });
    expect(job.state).toBe('timed_out');
    await waitFor('its container removed', () => containers().length === 0, 30_000);
  }, 180_000);

  test('an image not on the engine, and an engine that does not answer: failed at once, saying what to do', async () => {
    const absent = await s.callOk<Job>('spawn_absent', { prompt: 'hello', wait_s: 120 });
    expect(absent.state).toBe('failed');
    expect(absent.error).toMatch(
      /the image polyspawn-test\/absent:1 is not on this docker engine \(.+\), and polyspawn does not pull one while an agent waits/,
    );
    const nowhere = await s.callOk<Job>('spawn_nowhere', { prompt: 'hello', wait_s: 120 });
    expect(nowhere.state).toBe('failed');
    expect(nowhere.error).toMatch(/no docker engine answers \(.*no-engine\.sock.*\): start it/);
    expect(containers()).toEqual([]);
  }, 180_000);
  test("an engine that never gives the work back: timed out within the job's time-out, the container kept and named", async () => {
    const job = await s.callOk<Job>('spawn_stallout', {
      prompt: '[[cli:write:kept.txt=not lost]] [[cli:commit:work to keep]]',
      timeout_s: 30,
    });
    const done = await ended(job.agent_id);
    expect(done.state, done.error).toBe('timed_out');
    const container = /the container (\S+) is kept on the docker engine/.exec(done.error ?? '')?.[1];
    expect(done.error).toMatch(/^its work could not be copied out of its container within the job's time-out \(/);
    expect(done.error).toContain('raise timeout_s');
    // Stopped, its work in it: copied out through the engine itself.
    expect(containers()).toEqual([container]);
    expect(running(container!)).toBe(false);
    const bundle = join(project, '.polyspawn', 'runs', job.agent_id, 'result.bundle');
    expect(docker2('cp', `${container}:${bundle}`, '-').status).toBe(0);
    docker2('rm', '-f', container!);
  }, 180_000);

  test('the engine restarted under an agent whose folder it mounts: failed saying so, nothing left, the work kept', async () => {
    writeFileSync(join(project, 'mine.txt'), "the user's own\n");
    const job = await s.callOk<Job>('spawn_sharing', {
      prompt: '[[cli:write:written.txt=before the restart]] outlive my engine [[cli:hang]]',
    });
    await waitFor('its container, running', () => containers().some(running), 90_000);
    // Written in the user's folder, mounted into the container.
    await waitFor('what it wrote', () => existsSync(join(project, 'written.txt')), 60_000);
    await restartSecondDockerd();
    const done = await ended(job.agent_id);
    expect(done.state).toBe('failed');
    expect(done.error).toMatch(/^its container was (stopped \(exit 143|killed \(exit 137)/);
    // Nothing left: the engine, back up, removes the container it had to remove (`run --rm`).
    await waitFor('its container removed', () => containers().length === 0, 60_000);
    // Nothing of the user's lost: their file, and what the agent wrote before the restart.
    expect(readFileSync(join(project, 'mine.txt'), 'utf8')).toBe("the user's own\n");
    expect(readFileSync(join(project, 'written.txt'), 'utf8')).toBe('before the restart\n');
    rmSync(join(project, 'mine.txt'));
    rmSync(join(project, 'written.txt'));
  }, 240_000);
});

/**
 * Joins a client to the second engine, byte for byte, until it asks for a container's archive
 * (what `cp <container>:<path> -` reads): that request is taken and never answered.
 */
function stallCopyOut(client: Socket): void {
  const engine = connect({ path: SECOND_DOCKER.slice('unix://'.length), allowHalfOpen: true });
  let stalled = false;
  client.on('data', (chunk: Buffer) => {
    stalled ||= /^GET \S*\/containers\/[^/\s]+\/archive\?/m.test(chunk.toString('latin1'));
    if (!stalled) engine.write(chunk);
  });
  client.on('end', () => stalled || engine.end());
  engine.on('data', (chunk: Buffer) => stalled || client.write(chunk));
  engine.on('end', () => stalled || client.end());
  for (const side of [client, engine])
    side.on('error', () => {
      client.destroy();
      engine.destroy();
    });
}
