// A CLI agent on a container engine that shares no files with this machine, as one on another host
// would, on each engine: a second dockerd (test/helpers/engines.ts's SECOND_DOCKER: its own socket,
// data and exec roots) and a second podman service (SECOND_PODMAN: its own storage and state, its
// API on its own socket), reached only through their sockets by `engine: { host, shares_files:
// false }` (`docker -H`, `podman --remote --url`); on docker also through a context. Nothing is
// bind-mounted: the agent gets the project as its branch, its commits come back as polyspawn/<id>
// and integrate merges them into the user's checkout. Its faults (a branch that cannot be taken, a
// killed container, an image not there, an engine that does not answer or never gives the work
// back, the engine restarted under the agent) are said plainly and leave
// no container. Under CI an engine that cannot start fails the run (vitest.config.ts, TOOLS); elsewhere
// these tests skip, said in one line.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  agentImage,
  clientAt,
  containersIn,
  ENGINES,
  restartSecondEngine,
  SECOND_ENGINES,
  sshEngine,
  SSHD,
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
const git = (cwd: string, ...args: string[]) =>
  spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' });

for (const engine of ENGINES) {
  const { host } = SECOND_ENGINES[engine];
  const up = SECOND_ENGINES[engine].start();
  /** The second engine's client, as a user would type it. */
  const client = [engine, ...clientAt(engine, host)];
  const engine2 = (...args: string[]) =>
    spawnSync(engine, [...clientAt(engine, host), ...args], { encoding: 'utf8', timeout: 60_000 });
  const running = (name: string) => engine2('inspect', '--format', '{{.State.Running}}', name).stdout.trim() === 'true';

  describe.skipIf(!up)(
    `${engine} on an engine that shares no files (a second ${engine === 'docker' ? 'dockerd' : 'podman service'}, through its socket)`,
    () => {
      let s: TestServer;
      let root: string;
      let project: string;
      let home: string;
      let slowEngine: Server;
      let stallingEngine: Server;
      let dockerConfig: string;
      let ssh: Awaited<ReturnType<typeof sshEngine>> | undefined;
      const sshdInstalled = existsSync(SSHD);
      const CONTEXT = 'polyspawn-test-docker2';
      const FAR_CONTEXT = 'polyspawn-test-far';
      const containers = () => containersIn(engine, [root], host);

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
        const image = await agentImage(engine, true, host);
        const remote = { host, shares_files: false };
        const config = join(root, 'config.json');
        writeFileSync(
          config,
          JSON.stringify({
            backends: {
              claude: { sandbox: { mode: engine, image, engine: remote } },
              // No engine named: the environment's (docker's current context, below).
              ...(engine === 'docker' ? { copilot: { sandbox: { mode: 'docker', image } } } : {}),
            },
          }),
        );
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
          `{ mode: ${engine}, image: polyspawn-test/absent:1, engine: { host: "${host}", shares_files: false } }`,
        );
        agent(
          'nowhere',
          `{ mode: ${engine}, image: ${image}, engine: { host: "unix://${join(root, 'no-engine.sock')}", shares_files: false } }`,
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
            `{ mode: ${engine}, image: ${image}, engine: { host: "unix://${join(root, 'slow-engine.sock')}", shares_files: ${shares} } }`,
          );
        // The second engine, but a copy out of a container (`cp <container>:<path> -`, a GET of its
        // archive) is taken and never answered.
        stallingEngine = createServer({ allowHalfOpen: true }, (client) => stallCopyOut(client, host));
        await new Promise<void>((resolve) => stallingEngine.listen(join(root, 'stalling-engine.sock'), resolve));
        agent(
          'stallout',
          `{ mode: ${engine}, image: ${image}, engine: { host: "unix://${join(root, 'stalling-engine.sock')}", shares_files: false } }`,
        );
        // The second engine as one that shares this machine's files: the agent's folder bind-mounted.
        agent('sharing', `{ mode: ${engine}, image: ${image}, engine: { host: "${host}", shares_files: true } }`);
        // docker's contexts, in a config folder of the test's own (never the machine's ~/.docker): one
        // for the second engine, one for an engine elsewhere (a tcp:// endpoint, nothing listening),
        // which is also the current context an agent that names no engine would get.
        dockerConfig = join(root, 'docker-config');
        mkdirSync(dockerConfig);
        if (engine === 'docker') {
          for (const [name, endpoint] of [
            [CONTEXT, host],
            [FAR_CONTEXT, 'tcp://127.0.0.1:9'],
          ]) {
            const made = spawnSync('docker', ['context', 'create', name!, '--docker', `host=${endpoint}`], {
              env: { ...process.env, DOCKER_CONFIG: dockerConfig },
              encoding: 'utf8',
            });
            expect(made.status, made.stderr).toBe(0);
          }
          writeFileSync(join(dockerConfig, 'config.json'), JSON.stringify({ currentContext: FAR_CONTEXT }));
          agent('bycontext', `{ mode: docker, image: ${image}, engine: { context: ${CONTEXT}, shares_files: false } }`);
          agent('farcontext', `{ mode: docker, image: ${image}, engine: { context: ${FAR_CONTEXT} } }`);
          agent('nocontext', `{ mode: docker, image: ${image}, engine: { context: polyspawn-test-none } }`);
        }
        // The second dockerd reached over ssh (an sshd of the test's own), as an engine on another host.
        if (engine === 'docker' && sshdInstalled) {
          ssh = await sshEngine(join(root, 'ssh'), host);
          agent('overssh', `{ mode: docker, image: ${image}, engine: { host: "${ssh.host}", shares_files: false } }`);
          // The same sshd by another name, which known_hosts does not know.
          const unknown = ssh.host.replace('127.0.0.1', 'localhost');
          agent(
            'unknownhost',
            `{ mode: docker, image: ${image}, engine: { host: "${unknown}", shares_files: false } }`,
          );
        }
        s = await startServer({
          projectDir: project,
          env: {
            HOME: home,
            XDG_CONFIG_HOME: join(home, '.config'),
            // ssh's key and known host for the engine client, by its wrapper (the user's own ssh config is theirs).
            PATH: ssh ? `${ssh.bin}:${HOST_PATH}` : HOST_PATH,
            POLYSPAWN_CONFIG: config,
            DOCKER_CONFIG: dockerConfig,
          },
          fakeClis: false,
        });
      }, 300_000);
      afterAll(async () => {
        await s?.close();
        slowEngine?.close();
        stallingEngine?.close();
        ssh?.stop();
        const left = containersIn(engine, [root], host);
        if (left.length) engine2('rm', '-f', ...left);
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
        expect(job.sandbox).toBe(`${engine} (an engine sharing no files: ${host})`);
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

      // docker's contexts and ssh transport (podman has neither here): registered on docker only.
      if (engine === 'docker') {
        test.skipIf(!sshdInstalled)(
          'over ssh (engine.host ssh://…): the client reaches the engine through ssh, the agent works on its branch there, and the branch integrates',
          async () => {
            const job = await s.callOk<Job>('spawn_overssh', {
              prompt:
                '[[cli:write:over-ssh.txt=made over ssh]] [[cli:commit:the agent adds a file over ssh]] [[cli:read:README.md]]',
              wait_s: 120,
            });
            expect(job.state, job.error).toBe('succeeded');
            expect(job.sandbox).toBe(`docker (an engine sharing no files: ${ssh!.host})`);
            expect(JSON.parse(job.text!)).toEqual({ 'read:README.md': 'ok: the project' });
            // It went through the test's sshd, by its key.
            expect(readFileSync(join(root, 'ssh', 'sshd.log'), 'utf8')).toMatch(/Accepted publickey for root/);
            expect(job.worktree).toMatchObject({ branch: `polyspawn/${job.agent_id}`, files: ['over-ssh.txt'] });
            const merged = await s.callOk('integrate', { agent_id: job.agent_id, how: 'merge' });
            expect(merged).toMatchObject({ how: 'merge', files: ['over-ssh.txt'], removed: true });
            expect(readFileSync(join(project, 'over-ssh.txt'), 'utf8')).toBe('made over ssh\n');
            expect(containers()).toEqual([]);
            // A host ssh does not know: ssh's refusal, said as the ssh login to fix.
            const refused = await s.callOk<Job>('spawn_unknownhost', { prompt: 'hello', wait_s: 120 });
            expect(refused.state).toBe('failed');
            expect(refused.error).toMatch(
              /ssh did not let the docker client reach its engine \(.*Host key verification failed.*\): make `ssh <user>@<host> docker version` work without a prompt/,
            );
            expect(containers()).toEqual([]);
          },
          180_000,
        );

        test('through a docker context (engine.context): the agent works on its branch there, and the branch integrates', async () => {
          const job = await s.callOk<Job>('spawn_bycontext', {
            prompt:
              '[[cli:write:by-context.txt=made through a context]] [[cli:commit:the agent adds a file]] [[cli:read:README.md]]',
            wait_s: 120,
          });
          expect(job.state, job.error).toBe('succeeded');
          expect(job.sandbox).toBe(`docker (an engine sharing no files: context ${CONTEXT})`);
          expect(JSON.parse(job.text!)).toEqual({ 'read:README.md': 'ok: the project' });
          expect(job.worktree).toMatchObject({ branch: `polyspawn/${job.agent_id}`, files: ['by-context.txt'] });
          const merged = await s.callOk('integrate', { agent_id: job.agent_id, how: 'merge' });
          expect(merged).toMatchObject({ how: 'merge', files: ['by-context.txt'], removed: true });
          expect(readFileSync(join(project, 'by-context.txt'), 'utf8')).toBe('made through a context\n');
          expect(containers()).toEqual([]);
        }, 180_000);

        test("a context's endpoint decides at spawn time whether its engine shares files; docker's current context, when remote, is refused unless the sandbox says so", async () => {
          // tcp://: another machine's, so the agent works on a branch; nothing listens there, said plainly.
          const far = await s.callOk<Job>('spawn_farcontext', { prompt: 'hello', wait_s: 120 });
          expect(far.sandbox).toBe(`docker (an engine sharing no files: context ${FAR_CONTEXT})`);
          expect(far.worktree?.branch).toBe(`polyspawn/${far.agent_id}`);
          expect(far.state).toBe('failed');
          expect(far.error).toMatch(/no docker engine answers \(.*127\.0\.0\.1:9.*\): start it/);
          // A context docker does not have: refused at the spawn, before any worktree or container.
          expect(await s.callError('spawn_nocontext', { prompt: 'hello' })).toMatch(
            /the docker context "polyspawn-test-none" cannot be read \(context "polyspawn-test-none": context not found.*\): create it \(`docker context create polyspawn-test-none --docker host=…`\)/,
          );
          // No engine in the sandbox: the current context (config.json's currentContext) is the engine.
          const undeclared = await s.callOk<Job>('spawn_copilot', { prompt: 'hello', wait_s: 120 });
          expect(undeclared.state).toBe('failed');
          expect(undeclared.error).toContain(
            `docker's current context ${FAR_CONTEXT} (currentContext in ${join(dockerConfig, 'config.json')}) points at tcp://127.0.0.1:9, which may not see this machine's files: say so in the sandbox (engine: { context: "${FAR_CONTEXT}", shares_files: false }`,
          );
        }, 180_000);
      }

      test('its container mounts nothing, its log streams back while it runs, and cancel removes it', async () => {
        const job = await s.callOk<Job>('spawn_claude', {
          prompt: '[[cli:stderr:said in the container]] cancel me [[cli:hang]]',
        });
        await waitFor('its container', () => containers().length === 1, 90_000);
        const [name] = containers();
        expect(JSON.parse(engine2('inspect', '--format', '{{json .Mounts}}', name!).stdout)).toEqual([]);
        // docker says no binds as null, podman as []
        expect(JSON.parse(engine2('inspect', '--format', '{{json .HostConfig.Binds}}', name!).stdout) ?? []).toEqual(
          [],
        );
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
        const planted = engine2('exec', name!, 'node', '-e', `require('fs').mkdirSync(${JSON.stringify(bundle)})`);
        expect(planted.status, planted.stderr).toBe(0);
        const done = await ended(job.agent_id);
        expect(done.state).toBe('failed');
        expect(done.error).toContain(
          `result.bundle in the container is not a regular file (a link, a folder): not taken`,
        );
        expect(done.error).toContain(`the container ${name} is kept on the ${engine} engine at ${host}`);
        expect(done.error).toContain(`\`${client.join(' ')} cp ${name}:`);
        expect(containers()).toEqual([name]);
        expect(existsSync(bundle)).toBe(false);
        engine2('rm', '-f', name!);
      }, 180_000);

      test('a container killed under the agent: failed saying so, nothing left', async () => {
        const job = await s.callOk<Job>('spawn_claude', { prompt: 'kill my container [[cli:hang]]' });
        // Made and given its work first, then started: killed once it runs.
        await waitFor('its container, running', () => containers().some(running), 90_000);
        expect(engine2('kill', containers()[0]!).status).toBe(0);
        const done = await ended(job.agent_id);
        expect(done.state).toBe('failed');
        expect(done.error).toMatch(/^its container was killed \(exit 137/);
        await waitFor('its container removed', () => containers().length === 0, 30_000);
      }, 180_000);

      test('the engine restarted under the agent: failed saying so; its container kept and named, its work not lost', async () => {
        const job = await s.callOk<Job>('spawn_claude', { prompt: 'outlive my engine [[cli:hang]]' });
        await waitFor('its container, running', () => containers().some(running), 90_000);
        const [container] = containers();
        await restartSecondEngine(engine);
        const done = await ended(job.agent_id);
        // The engine went away while the run ended: its branch could not be copied out, so the
        // container is kept (with the work in it) and named, with what to do.
        expect(done.state).toBe('failed');
        expect(done.error).toMatch(
          new RegExp(
            `^its work could not be copied out of its container .*: the container ${container} is kept on the ${engine} engine`,
          ),
        );
        expect(done.error).toContain(`rm ${container}`);
        // Back up, the engine still has it: dockerd stopped it as it went; the podman service
        // left it running under its conmon (the agent still at work, which a restart of the
        // service does not end).
        expect(engine2('inspect', container!).status).toBe(0);
        expect(running(container!)).toBe(engine === 'podman');
        engine2('rm', '-f', container!);
      }, 240_000);

      test('an engine that never answers: the job times out (a clear state, no hang), and the server serves on', async () => {
        // Both at once: each ends only once its time-out and its client's end have passed.
        const [local, remote] = await Promise.all(
          ['spawn_slowlocal', 'spawn_slowremote'].map((tool) =>
            s.callOk<Job>(tool, { prompt: 'hello', timeout_s: 5, wait_s: 120 }),
          ),
        );
        expect(local!.state, local!.error).toBe('timed_out');
        // Made and given its work within the job's time-out, or not at all.
        expect(remote!.state, remote!.error).toBe('timed_out');
        expect(remote!.error).toMatch(
          new RegExp(`the ${engine} engine did not make the container and take its work within the job's time-out`),
        );
        expect((await s.callOk<{ agents: Job[] }>('list')).agents.length).toBeGreaterThan(0);
      }, 300_000);

      test('time-out removes the container', async () => {
        const job = await s.callOk<Job>('spawn_claude', {
          prompt: 'time me out [[cli:hang]]',
          timeout_s: 8,
          wait_s: 120,
        });
        expect(job.state).toBe('timed_out');
        await waitFor('its container removed', () => containers().length === 0, 30_000);
      }, 180_000);

      test('an image not on the engine, and an engine that does not answer: failed at once, saying what to do', async () => {
        const absent = await s.callOk<Job>('spawn_absent', { prompt: 'hello', wait_s: 120 });
        expect(absent.state).toBe('failed');
        expect(absent.error).toMatch(
          new RegExp(
            `the image polyspawn-test/absent:1 is not on this ${engine} engine \\(.+\\), and polyspawn does not pull one while an agent waits`,
          ),
        );
        const nowhere = await s.callOk<Job>('spawn_nowhere', { prompt: 'hello', wait_s: 120 });
        expect(nowhere.state).toBe('failed');
        expect(nowhere.error).toMatch(new RegExp(`no ${engine} engine answers \\(.*no-engine\\.sock.*\\): start it`));
        expect(containers()).toEqual([]);
      }, 180_000);

      test("an engine that never gives the work back: timed out within the job's time-out, the container kept and named", async () => {
        const job = await s.callOk<Job>('spawn_stallout', {
          prompt: '[[cli:write:kept.txt=not lost]] [[cli:commit:work to keep]]',
          timeout_s: 30,
        });
        const done = await ended(job.agent_id);
        expect(done.state, done.error).toBe('timed_out');
        const container = new RegExp(`the container (\\S+) is kept on the ${engine} engine`).exec(
          done.error ?? '',
        )?.[1];
        expect(done.error).toMatch(/^its work could not be copied out of its container within the job's time-out \(/);
        expect(done.error).toContain('raise timeout_s');
        // Stopped, its work in it: copied out through the engine itself.
        expect(containers()).toEqual([container]);
        expect(running(container!)).toBe(false);
        const bundle = join(project, '.polyspawn', 'runs', job.agent_id, 'result.bundle');
        expect(engine2('cp', `${container}:${bundle}`, '-').status).toBe(0);
        engine2('rm', '-f', container!);
      }, 180_000);

      // dockerd stops its containers as it restarts; a podman service leaves them running (above).
      if (engine === 'docker')
        test('the engine restarted under an agent whose folder it mounts: failed saying so, nothing left, the work kept', async () => {
          writeFileSync(join(project, 'mine.txt'), "the user's own\n");
          const job = await s.callOk<Job>('spawn_sharing', {
            prompt: '[[cli:write:written.txt=before the restart]] outlive my engine [[cli:hang]]',
          });
          await waitFor('its container, running', () => containers().some(running), 90_000);
          // Written in the user's folder, mounted into the container.
          await waitFor('what it wrote', () => existsSync(join(project, 'written.txt')), 60_000);
          await restartSecondEngine(engine);
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
    },
  );
}

/**
 * Joins a client to the engine at `host` (unix://), byte for byte, until it asks for a container's
 * archive (what `cp <container>:<path> -` reads): that request is taken and never answered.
 */
function stallCopyOut(client: Socket, host: string): void {
  const engine = connect({ path: host.slice('unix://'.length), allowHalfOpen: true });
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
