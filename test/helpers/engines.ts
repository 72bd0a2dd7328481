// The real container engines the container tests run agents on (docker's dockerd, podman), and the
// agent image they run: no registry is reachable, so it is built here from this machine's files
// (node, /bin/sh and the libraries they load, and the fake CLI with its channel side bundled) with
// `<engine> import`, tagged by a hash of what goes into it, so a second run on one machine
// reuses it. Every container a test's server starts carries polyspawn's store label; the setup
// file (test/setup/end-processes.ts) removes those of the file's temporary folders when it ends.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engineArgs, STORE_LABEL } from '../../src/jobs/process/sandbox.js';
import { MARK_VARIABLE } from './process-groups.js';
import { isGone, waitFor } from './processes.js';

export type Engine = 'docker' | 'podman';
export const ENGINES: readonly Engine[] = ['docker', 'podman'];

/** The client's arguments that point it at `host` (docker's -H, podman's --remote --url), as polyspawn's own. */
export const clientAt = (engine: Engine, host?: string): string[] =>
  engineArgs(engine, host ? { host, sharesFiles: false } : undefined);

/** An engine's client, pointed at `host` when given, else at the environment's engine. */
const run = (engine: Engine, args: string[], input?: Buffer, host?: string) =>
  spawnSync(engine, [...clientAt(engine, host), ...args], {
    input,
    encoding: 'buffer',
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });

/** The engine answers (its daemon or its storage works). */
export const engineWorks = (engine: Engine, host?: string): boolean =>
  spawnSync(engine, [...clientAt(engine, host), 'info'], { stdio: 'ignore', timeout: 30_000 }).status === 0;

/**
 * A second docker engine on this machine that shares nothing with the first: its own socket, data
 * and exec roots, no bridge and no iptables rules (its containers use the host's network or none).
 * The remote-engine tests drive it only through its socket, as an engine on another host would be.
 */
export const SECOND_DOCKER = 'unix:///run/polyspawn-test-docker2.sock';
const SECOND_DOCKERD = [
  '--host',
  SECOND_DOCKER,
  '--data-root',
  '/var/lib/polyspawn-docker2',
  '--exec-root',
  '/run/polyspawn-docker2',
  '--pidfile',
  '/run/polyspawn-docker2.pid',
  '--bridge',
  'none',
  '--iptables=false',
  '--ip-masq=false',
];

/**
 * A second podman service on this machine that shares nothing with the machine's podman: its own
 * storage (root, runroot), libpod state (tmpdir), volumes and network configs, serving its API on
 * its own socket (`podman system service`), which the remote-engine tests reach only through
 * `podman --remote --url`, as a podman on another host. Its pid is kept in SECOND_PODMAN_PID.
 */
export const SECOND_PODMAN = 'unix:///run/polyspawn-test-podman2.sock';
const SECOND_PODMAN_PID = '/run/polyspawn-podman2.pid';
const SECOND_PODMAN_SERVICE = [
  '--root',
  '/var/lib/polyspawn-podman2/storage',
  '--runroot',
  '/run/polyspawn-podman2/storage',
  '--tmpdir',
  '/run/polyspawn-podman2/tmp',
  '--volumepath',
  '/var/lib/polyspawn-podman2/volumes',
  '--network-config-dir',
  '/var/lib/polyspawn-podman2/networks',
  'system',
  'service',
  '--time=0',
  SECOND_PODMAN,
];

/**
 * Its engine config: podman as root raises a container's open-files and process limits past what
 * this machine lets a process raise them to (runc: `error setting rlimits`), so they are kept
 * within, as the container tests' engine config does (there, the client's; here, the service's).
 */
const SECOND_PODMAN_CONF = '/var/lib/polyspawn-podman2/containers.conf';

/**
 * Starts an engine's daemon (`file` with its arguments, as root, where it is installed), logging
 * to `log`, its pid kept in `pidFile` when given; true once `engine` at `host` answers.
 */
function startDaemon(
  engine: Engine,
  host: string | undefined,
  [file, ...args]: string[],
  log: string,
  pidFile?: string,
  extraEnv: Record<string, string> = {},
): boolean {
  if (engineWorks(engine, host)) return true;
  if (process.getuid?.() !== 0 || spawnSync(file!, ['--version'], { stdio: 'ignore' }).status !== 0) return false;
  const out = openSync(log, 'a');
  // A service of the machine (as .ci/run starts it), not a test's process: unmarked, so the test
  // that started it does not end it (test/helpers/process-groups.ts).
  const env = { ...process.env, ...extraEnv };
  delete env[MARK_VARIABLE];
  // In `/`: it outlives the folder it was started from (a CI clone, removed after the run), and a
  // podman service whose working folder is gone can no longer start a container ("preparing
  // container … for attach: exit status 1").
  const daemon = spawn(file!, args, { detached: true, stdio: ['ignore', out, out], env, cwd: '/' });
  daemon.unref();
  if (pidFile) writeFileSync(pidFile, `${daemon.pid}\n`);
  for (let i = 0; i < 60; i++) {
    if (engineWorks(engine, host)) return true;
    spawnSync('sleep', ['0.5']);
  }
  return false;
}

/** The second docker engine (SECOND_DOCKER) started where it is not answering; true when it answers. What .ci/run does too. */
export const startSecondDockerd = (): boolean =>
  startDaemon('docker', SECOND_DOCKER, ['dockerd', ...SECOND_DOCKERD], '/var/log/polyspawn-docker2.log');

/** The second podman service (SECOND_PODMAN) started where it is not answering; true when it answers. What .ci/run does too. */
export function startSecondPodman(): boolean {
  if (engineWorks('podman', SECOND_PODMAN)) return true;
  if (process.getuid?.() === 0) {
    for (const dir of ['/var/lib/polyspawn-podman2/networks', '/run/polyspawn-podman2'])
      mkdirSync(dir, { recursive: true });
    writeFileSync(SECOND_PODMAN_CONF, '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n');
  }
  return startDaemon(
    'podman',
    SECOND_PODMAN,
    ['podman', ...SECOND_PODMAN_SERVICE],
    '/var/log/polyspawn-podman2.log',
    SECOND_PODMAN_PID,
    { CONTAINERS_CONF: SECOND_PODMAN_CONF },
  );
}

/** Each engine's second engine, which shares nothing with the machine's: where it listens, how it starts, its pid file. */
export const SECOND_ENGINES: Record<Engine, { host: string; start: () => boolean; pidFile: string }> = {
  docker: { host: SECOND_DOCKER, start: startSecondDockerd, pidFile: '/run/polyspawn-docker2.pid' },
  podman: { host: SECOND_PODMAN, start: startSecondPodman, pidFile: SECOND_PODMAN_PID },
};

/**
 * The second engine stopped as an engine restart does (SIGTERM: dockerd stops its containers; the
 * podman service leaves them to their conmon), then started again.
 */
export async function restartSecondEngine(engine: Engine): Promise<void> {
  const second = SECOND_ENGINES[engine];
  const pid = Number(readFileSync(second.pidFile, 'utf8').trim());
  process.kill(pid, 'SIGTERM');
  await waitFor(`the second ${engine} engine to stop`, () => isGone(pid), 60_000);
  if (!second.start()) throw new Error(`the second ${engine} engine did not start again`);
}

/** engineWorks, asked once per process (by a test file). */
const answers = new Map<Engine, boolean>();
export function engineAnswers(engine: Engine): boolean {
  let ok = answers.get(engine);
  if (ok === undefined) {
    ok = engineWorks(engine);
    answers.set(engine, ok);
  }
  return ok;
}

/**
 * Starts dockerd (as root, where it is installed and not running) in the background with its own
 * log, and waits until it answers; true when it does. What .ci/run and vitest.config.ts do when no
 * docker engine answers.
 */
export const startDockerd = (): boolean => startDaemon('docker', undefined, ['dockerd'], '/var/log/dockerd.log');

/**
 * What a fake CLI in the image runs: /usr/local/bin/<cli> → node /opt/fakes/fake-cli.mjs <cli>; the
 * fake ACP agent is /opt/fakes/fake-acp-agent.mjs.
 */
const CLIS = ['claude', 'codex', 'copilot', 'gemini'];
const FAKES = fileURLToPath(new URL('../fakes', import.meta.url));

/** The libraries an executable loads (ldd's absolute paths) and the loader. */
function libraries(file: string): string[] {
  const out = execFileSync('ldd', [file], { encoding: 'utf8' });
  return [...out.matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]!);
}

/** The image's files: where each goes in it, and its content (a file of this machine or a text). */
async function imageFiles(withCli: boolean): Promise<Map<string, { from?: string; text?: string; mode: number }>> {
  const files = new Map<string, { from?: string; text?: string; mode: number }>();
  const node = realpathSync(execFileSync('sh', ['-c', 'command -v node'], { encoding: 'utf8' }).trim());
  const sh = realpathSync('/bin/sh');
  files.set('/usr/local/bin/node', { from: node, mode: 0o755 });
  files.set('/bin/sh', { from: sh, mode: 0o755 });
  for (const lib of new Set([...libraries(node), ...libraries(sh)]))
    files.set(lib, { from: realpathSync(lib), mode: 0o755 });
  if (!withCli) return files;
  // git, which an engine that shares no files needs to clone the agent's branch and bundle it back
  // (its builtins run as git-core/git).
  const git = realpathSync(execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim());
  files.set('/usr/bin/git', { from: git, mode: 0o755 });
  files.set('/usr/lib/git-core/git', { from: git, mode: 0o755 });
  for (const lib of libraries(git)) files.set(lib, { from: realpathSync(lib), mode: 0o755 });
  // The channel side (fake-parent.mjs) needs the MCP SDK, the fake ACP agent the ACP SDK: bundled,
  // so the image has no node_modules. Loaded here, not by the setup file that imports this one for
  // every test file.
  const { buildSync } = await import('esbuild');
  for (const fake of ['fake-parent.mjs', 'fake-acp-agent.mjs']) {
    const bundled = buildSync({
      entryPoints: [join(FAKES, fake)],
      bundle: true,
      platform: 'node',
      format: 'esm',
      write: false,
      logLevel: 'silent',
      // Bundled CommonJS (ajv) calls require: the image's node gives it one.
      banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
    });
    files.set(`/opt/fakes/${fake}`, { text: bundled.outputFiles[0]!.text, mode: 0o644 });
  }
  for (const name of ['fake-cli.mjs', 'drive-daemon.mjs'])
    files.set(`/opt/fakes/${name}`, { from: join(FAKES, name), mode: 0o644 });
  for (const cli of CLIS)
    files.set(`/usr/local/bin/${cli}`, {
      text: `#!/bin/sh\nexec node /opt/fakes/fake-cli.mjs ${cli} "$@"\n`,
      mode: 0o755,
    });
  return files;
}

type ImageFiles = Awaited<ReturnType<typeof imageFiles>>;

/** Each image's files and tag, worked out once per process (hashing node takes a while). */
const contents = new Map<boolean, { files: ImageFiles; tag: string }>();

async function imageContent(withCli: boolean): Promise<{ files: ImageFiles; tag: string }> {
  const files = await imageFiles(withCli);
  const hash = createHash('sha256');
  for (const [path, file] of [...files].sort(([a], [b]) => a.localeCompare(b)))
    hash.update(`${path}\0${file.mode}\0`).update(file.from ? readFileSync(file.from) : file.text!);
  return { files, tag: `polyspawn-test/${withCli ? 'agent' : 'bare'}:${hash.digest('hex').slice(0, 16)}` };
}

/**
 * The test agent image on this engine (node, sh and, `withCli`, the fake CLIs on its PATH), built
 * when the engine has none of this content yet: `polyspawn-test/agent:<hash>` (or `.../bare:`).
 */
export async function agentImage(engine: Engine, withCli = true, host?: string): Promise<string> {
  let content = contents.get(withCli);
  if (!content) contents.set(withCli, (content = await imageContent(withCli)));
  const { files, tag } = content;
  if (run(engine, ['image', 'inspect', tag], undefined, host).status === 0) return tag;
  const rootfs = mkdtempSync(join(tmpdir(), 'polyspawn-image-'));
  try {
    for (const [path, file] of files) {
      const target = join(rootfs, path);
      mkdirSync(dirname(target), { recursive: true });
      if (file.from) copyFileSync(file.from, target);
      else writeFileSync(target, file.text!);
      chmodSync(target, file.mode);
    }
    mkdirSync(join(rootfs, 'tmp'), { mode: 0o1777 });
    chmodSync(join(rootfs, 'tmp'), 0o1777);
    const tar = execFileSync('tar', ['-C', rootfs, '-c', '.'], { maxBuffer: 1024 * 1024 * 1024 });
    const imported = run(
      engine,
      ['import', '-c', 'ENV PATH=/usr/local/bin:/usr/bin:/bin', '-c', 'LABEL polyspawn-test=1', '-', tag],
      tar,
      host,
    );
    if (imported.status !== 0) throw new Error(`${engine} import failed: ${imported.stderr.toString()}`);
    return tag;
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
}

/** The containers (running or not) whose run store lies in one of these folders. */
export function containersIn(engine: Engine, folders: readonly string[], host?: string): string[] {
  const listed = run(
    engine,
    ['ps', '-a', '--filter', `label=${STORE_LABEL}`, '--format', '{{.Names}}'],
    undefined,
    host,
  );
  const names = listed.status === 0 ? listed.stdout.toString().split('\n').filter(Boolean) : [];
  return names.filter((name) => {
    const store = run(
      engine,
      ['inspect', '--format', `{{index .Config.Labels "${STORE_LABEL}"}}`, name],
      undefined,
      host,
    )
      .stdout.toString()
      .trim();
    return store !== '' && folders.some((f) => store === f || store.startsWith(f + '/'));
  });
}

/** The engines this process used (engineAnswers said yes): the setup file cleans up after them. */
export const usedEngines = (): Engine[] => [...answers].filter(([, ok]) => ok).map(([engine]) => engine);

/** Removes the containers whose run store lies in these folders, on every engine this process used. */
export function removeTestContainers(folders: readonly string[]): void {
  for (const engine of usedEngines()) {
    const names = containersIn(engine, folders);
    if (names.length) run(engine, ['rm', '-f', ...names]);
  }
}

/** Debian's sshd (openssh-server): what the ssh:// engine test runs, as .ci/run installs it. */
export const SSHD = '/usr/sbin/sshd';

/**
 * A docker engine reached over ssh (`ssh://root@127.0.0.1:<port>`), as on another host: an sshd of
 * the test's own on 127.0.0.1 (its host key, one authorized key, its config, all in `dir`; never
 * the machine's sshd config nor ~/.ssh), whose sessions get DOCKER_HOST=`remoteDocker` (sshd's
 * SetEnv), so the docker client's `ssh … docker system dial-stdio` reaches that engine. ssh reads
 * its config from the user's passwd home, not HOME: the client is given its key and known host by
 * an `ssh` wrapper in `bin` (put first on the server's PATH), which passes `-F` its own config.
 * The sshd is the test's process: `stop` ends it (and the setup file would).
 */
export async function sshEngine(
  dir: string,
  remoteDocker: string,
): Promise<{ host: string; bin: string; stop: () => void }> {
  mkdirSync(dir, { recursive: true });
  const keygen = (file: string) => execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, file)]);
  keygen('host_key');
  keygen('client_key');
  copyFileSync(join(dir, 'client_key.pub'), join(dir, 'authorized_keys'));
  const port = await freePort();
  writeFileSync(
    join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(dir, 'host_key')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      // The test's temporary folders are not root's own as sshd wants ~/.ssh to be.
      'StrictModes no',
      'PermitRootLogin prohibit-password',
      `SetEnv DOCKER_HOST=${remoteDocker}`,
      '',
    ].join('\n'),
  );
  writeFileSync(join(dir, 'known_hosts'), `[127.0.0.1]:${port} ${readFileSync(join(dir, 'host_key.pub'), 'utf8')}`);
  writeFileSync(
    join(dir, 'ssh_config'),
    [
      'Host *',
      `  IdentityFile ${join(dir, 'client_key')}`,
      '  IdentitiesOnly yes',
      `  UserKnownHostsFile ${join(dir, 'known_hosts')}`,
      '  StrictHostKeyChecking yes',
      '  BatchMode yes',
      '',
    ].join('\n'),
  );
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  const ssh = realpathSync(execFileSync('sh', ['-c', 'command -v ssh'], { encoding: 'utf8' }).trim());
  writeFileSync(join(bin, 'ssh'), `#!/bin/sh\nexec ${ssh} -F ${join(dir, 'ssh_config')} "$@"\n`);
  chmodSync(join(bin, 'ssh'), 0o755);
  // sshd's privilege separation folder, which Debian's service would make.
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const log = openSync(join(dir, 'sshd.log'), 'a');
  const sshd = spawn(SSHD, ['-D', '-e', '-f', join(dir, 'sshd_config')], { stdio: ['ignore', log, log] });
  const stop = () => {
    if (sshd.exitCode === null && sshd.signalCode === null) sshd.kill('SIGTERM');
  };
  try {
    await waitFor(
      'the test sshd to listen',
      () => readFileSync(join(dir, 'sshd.log'), 'utf8').includes('Server listening'),
      30_000,
    );
  } catch (error) {
    stop();
    throw new Error(`${(error as Error).message}: ${readFileSync(join(dir, 'sshd.log'), 'utf8')}`);
  }
  return { host: `ssh://root@127.0.0.1:${port}`, bin, stop };
}

/** A port nothing listens on now, on 127.0.0.1. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
