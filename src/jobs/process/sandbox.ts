// A CLI's command wrapped in a sandbox (src/config/sandbox.ts says which): bubblewrap, or a
// docker/podman container. The wrapper is what the runner starts, so it leads the job's process
// group and everything else in a job's life (logs, time-out, cancel, the channel) is unchanged.
// Nothing secret goes into the wrapper's arguments: the child's environment is inherited
// (bwrap) or passed by name (`-e NAME`), never as values.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, constants, lstatSync, openSync, readFileSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve, sep } from 'node:path';
import which from 'which';
import type { SandboxPaths } from '../../../backends/types.js';
import { sharesFilesAt, type SandboxEngine, type SandboxMode, type SandboxSettings } from '../../config/sandbox.js';
import { isInside, makeDirs } from '../../lib/fs.js';
import { isLoopbackHost } from '../../lib/sockets.js';
import { currentDockerContext, dockerContextEndpoint } from './docker-context.js';

/** What wrapping one run needs. */
export type SandboxRun = {
  sandbox: SandboxSettings;
  /** The backend's own folders and installation (CliBackend.sandboxPaths). */
  paths: SandboxPaths | undefined;
  /** The variables that point the CLI at another model API (CliBackend.modelEndpointEnv). */
  modelEndpointEnv: readonly string[];
  /** The backend's executable name: what a container runs from its image. */
  executable: string;
  /** The CLI's command, as the backend made it. */
  file: string;
  args: string[];
  /** The child's whole environment (bwrap inherits it; a container gets its names). */
  env: Readonly<Record<string, string>>;
  /** The agent's folder: read-write. */
  cwd: string;
  /** The run's own folder (the files the command was given, the ones it writes back): read-write. */
  runDir: string;
  /** The job's own git worktree, when it has one: read-write, though it lies in the run store. */
  worktree?: string;
  /** Its branch (polyspawn/<id>): what an engine that shares no files checks out and brings back. */
  branch?: string;
  /** The files the CLI writes for the server to read (CommandSpec.artifacts): copied back from an engine that shares no files. */
  outputs?: string[];
  /**
   * What no agent may see: the run store (tokens, the daemon's file, other runs and worktrees),
   * the agents' definitions, the key and config files. Hidden wherever a bound folder holds them.
   */
  hidden: string[];
  /** The container's name (containerName). */
  container: string;
  /** The run store: a container is labelled with it (STORE_LABEL), so a project's containers can be listed. */
  store: string;
};

export type WrappedCommand = {
  file: string;
  args: string[];
  /** Open folders and files the wrapper binds by descriptor (the child's fds 3, 4, ...): the runner passes and closes them. */
  fds?: number[];
  /** Ends what a kill of the process group cannot reach (a container its engine runs). */
  stop?: () => Promise<void>;
  /**
   * Readies what the command starts (a container made and its work copied in) by `deadline` (the
   * job's time-out, as Date.now() counts); a SandboxError says why it cannot.
   */
  prepare?: (deadline: number) => Promise<void>;
  /**
   * After the run: brings the work back (from an engine that shares no files) by `deadline` (the
   * job's time-out); a SandboxError says why it could not (timedOut: the time-out came first).
   */
  collect?: (deadline: number) => Promise<SandboxError | undefined>;
  /** A failed run's cause when the wrapper, not the CLI, failed (the engine's error, a killed container), said plainly. */
  explainFailure?: (run: { exitCode: number | null; stderr: string }) => string | undefined;
};

/** A sandbox that cannot start here; the message says what to change. */
export class SandboxError extends Error {
  /** The CLI itself was not found (its backend's install hint applies). */
  missingCli = false;
  /** The job's time-out came first (an engine that did not answer in time). */
  timedOut = false;
}

export const BWRAP_INSTALL =
  'install bubblewrap (`apt-get install bubblewrap`, `dnf install bubblewrap`), or run this agent with sandbox: none';
export const ENGINE_INSTALL: Record<string, string> = {
  docker: 'install Docker (https://docs.docker.com/engine/install/), or choose another sandbox',
  podman: 'install Podman (`apt-get install podman`), or choose another sandbox',
};

/** The least of a working sandbox, for `doctor`'s probe: namespaces, /proc, no network. */
export const BWRAP_PROBE = [
  '--ro-bind',
  '/',
  '/',
  '--dev',
  '/dev',
  '--proc',
  '/proc',
  '--unshare-pid',
  '--die-with-parent',
  '--unshare-net',
];

export function wrapInSandbox(run: SandboxRun): WrappedCommand {
  if (!run.sandbox.network) refuseWithoutModelApi(run);
  return run.sandbox.mode === 'bwrap' ? bwrapCommand(run) : containerCommand(run);
}

/** A run's container, named after the run and its store: cancel, time-out and recovery find it by name. */
export function containerName(stateDir: string, id: string): string {
  return `polyspawn-${id}-${createHash('sha256').update(stateDir).digest('hex').slice(0, 8)}`;
}

/** The label every container carries: its run store's path (`docker ps --filter label=polyspawn.store=<path>`). */
export const STORE_LABEL = 'polyspawn.store';

/** The host's folders a CLI needs to run and to reach its vendor: read-only. */
const SYSTEM_PATHS = ['/usr', '/etc', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * One path as the agent sees it, at the same place, links resolved: read-only, read-write, or
 * hidden (an empty tmpfs over a folder, /dev/null over a file). `link`: the path as it was given,
 * where links led elsewhere; `what` names it in an error.
 */
type Bind = { path: string; as: 'read' | 'write' | 'hide'; link?: string; what?: string; git?: true };

function bwrapCommand(run: SandboxRun): WrappedCommand {
  const bwrap = which.sync('bwrap', { path: run.env.PATH, nothrow: true });
  if (!bwrap) throw new SandboxError(`bwrap (bubblewrap) is not on PATH: ${BWRAP_INSTALL}`);
  const home = run.env.HOME;
  const executable = realExecutable(run.file, run.env);
  const install: Bind[] = [
    { path: run.paths ? run.paths.install(executable) : executable, as: 'read', what: `${run.file}'s installation` },
  ];
  const node = which.sync('node', { path: run.env.PATH, nothrow: true });
  if (node) {
    const installed = nodeInstall(realpathSync(node), home);
    if (!SYSTEM_PATHS.some((p) => isInside(p, installed)))
      install.push({ path: installed, as: 'read', what: "node's installation" });
  }
  const { binds, links, cwd } = sandboxBinds(run, home, install);

  const args: string[] = [];
  for (const path of SYSTEM_PATHS) {
    const stat = lstatOrUndefined(path);
    if (stat?.isSymbolicLink()) args.push('--symlink', readlinkSync(path), path);
    else if (stat?.isDirectory()) args.push('--ro-bind', path, path);
  }
  // A resolver file kept elsewhere (systemd-resolved's, under /run): name lookups need it.
  const resolv = realpathOrUndefined('/etc/resolv.conf');
  if (resolv && !isInside('/etc', resolv)) args.push('--ro-bind', resolv, resolv);
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  // The rest of the home folder is not there at all: an empty one, with the binds below in it.
  if (home && home !== sep) args.push('--tmpfs', home);
  // Each path bound by a descriptor opened on it, where bwrap can (0.8 on): what was checked is
  // what is mounted, though another agent swap a folder on its way for a link meanwhile.
  const pinned = bindsByFd(bwrap) ? pin(binds) : undefined;
  let childFd = 3;
  for (const bind of binds) {
    if (bind.as === 'hide')
      args.push(...(isDirectory(bind.path) ? ['--tmpfs', bind.path] : ['--ro-bind', '/dev/null', bind.path]));
    else if (pinned?.has(bind))
      args.push(bind.as === 'write' ? '--bind-fd' : '--ro-bind-fd', String(childFd++), bind.path);
    else args.push(bind.as === 'write' ? '--bind' : '--ro-bind', bind.path, bind.path);
  }
  // The paths as given (arguments name them) lead where the binds are.
  for (const bind of links) args.push('--symlink', bind.path, bind.link!);
  // A hidden folder's tmpfs, once what is bound back in it is there: writing in it fails, not vanishes.
  for (const bind of binds) if (bind.as === 'hide' && isDirectory(bind.path)) args.push('--remount-ro', bind.path);
  args.push('--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try');
  // bwrap started by root keeps every capability unless told: root in the sandbox must not
  // mount, trace or open files by handle past its binds.
  args.push('--cap-drop', 'ALL');
  if (!run.sandbox.network) args.push('--unshare-net');
  args.push('--chdir', cwd, '--', executable, ...run.args);
  return { file: bwrap, args, ...(pinned ? { fds: [...pinned.values()] } : {}) };
}

const bindFdSupport = new Map<string, boolean>();

/** Whether this bwrap takes --bind-fd (0.8.0 on), asked once. */
function bindsByFd(bwrap: string): boolean {
  let supported = bindFdSupport.get(bwrap);
  if (supported === undefined) {
    let version: RegExpExecArray | null = null;
    try {
      version = /(\d+)\.(\d+)/.exec(execFileSync(bwrap, ['--version'], { encoding: 'utf8', timeout: 5000 }));
    } catch {
      // an old or broken bwrap: bound by path
    }
    supported = version !== null && (Number(version[1]) > 0 || Number(version[2]) >= 8);
    bindFdSupport.set(bwrap, supported);
  }
  return supported;
}

/**
 * Each bound path opened (a link at its end refused) and checked to be the path it was meant to
 * be: a folder on its way swapped for a link since it was resolved fails the run. A file this
 * user cannot open for reading (an execute-only binary) stays bound by path. All closed on a failure.
 */
function pin(binds: Bind[]): Map<Bind, number> {
  const fds = new Map<Bind, number>();
  try {
    for (const bind of binds) {
      if (bind.as === 'hide') continue;
      let fd: number;
      try {
        fd = openSync(bind.path, constants.O_RDONLY | constants.O_NOFOLLOW);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EACCES') continue;
        throw new SandboxError(`${bind.path} cannot be bound: ${(error as Error).message}`);
      }
      fds.set(bind, fd);
      if (readlinkSync(`/proc/self/fd/${fd}`) !== bind.path)
        throw new SandboxError(`${bind.path} changed while its sandbox was made (a link on its way): try again`);
    }
    return fds;
  } catch (error) {
    for (const fd of fds.values()) closeSync(fd);
    throw error;
  }
}

/** Variables that describe the host, not the run: a container keeps its image's. */
const HOST_ONLY_ENV = new Set(['PATH', 'HOSTNAME', 'PWD', 'OLDPWD', 'SHLVL', '_', 'TERM', 'TMPDIR']);

/**
 * The engine's client, found on PATH, with the arguments that name the engine (engineArgs). An
 * engine the environment names on another machine (DOCKER_HOST, CONTAINER_HOST, podman's
 * CONTAINER_CONNECTION, docker's current context) while the sandbox does not say whether it
 * shares files is refused: bind mounts would name this machine's paths there.
 */
export function engineClient(run: Pick<SandboxRun, 'sandbox' | 'env'>): { file: string; args: string[] } {
  const { mode, engine } = run.sandbox;
  const found = which.sync(mode, { path: run.env.PATH, nothrow: true });
  if (!found) throw new SandboxError(`${mode} is not on PATH: ${ENGINE_INSTALL[mode]}`);
  if (!engine) refuseUndeclaredRemote(found, mode, run.env);
  return { file: found, args: engineArgs(mode, engine) };
}

function refuseUndeclaredRemote(client: string, mode: SandboxMode, env: SandboxRun['env']): void {
  const named = env.DOCKER_HOST ?? env.CONTAINER_HOST;
  if (named && !sharesFilesAt(named))
    throw new SandboxError(
      `the environment names the engine ${named}, which may not see this machine's files: say so in the sandbox (engine: { host: "${named}", shares_files: false }, or shares_files: true if it runs here)`,
    );
  // podman's named connection (`podman system connection`): set, it makes the client remote.
  if (mode === 'podman' && env.CONTAINER_CONNECTION && !named)
    throw new SandboxError(
      `the environment names podman's connection ${env.CONTAINER_CONNECTION} (CONTAINER_CONNECTION), whose engine may not see this machine's files: name that engine in the sandbox (engine: { host: "<its URI, from podman system connection list>", shares_files: false }, or shares_files: true if it runs here)`,
    );
  const context = mode === 'docker' ? currentDockerContext(env) : undefined;
  if (!context) return;
  if ('problem' in context) throw new SandboxError(context.problem);
  const found = dockerContextEndpoint(client, context.name, env, context.from);
  if ('problem' in found) throw new SandboxError(found.problem);
  if (!sharesFilesAt(found.endpoint))
    throw new SandboxError(
      `docker's current context ${context.name} (${context.from}) points at ${found.endpoint}, which may not see this machine's files: say so in the sandbox (engine: { context: "${context.name}", shares_files: false }, or shares_files: true if it runs here)`,
    );
}

/** The arguments that point an engine's client at `engine.host` or `engine.context` (none: the environment's engine). */
export function engineArgs(mode: SandboxMode, engine: SandboxEngine | undefined): string[] {
  if (engine?.context) return ['--context', engine.context];
  if (!engine?.host) return [];
  return mode === 'podman' ? ['--remote', '--url', engine.host] : ['-H', engine.host];
}

/**
 * What every polyspawn container is given, wherever its engine runs: its name and store label, the
 * user's uid (`asUser`: what it writes in the user's folders is theirs), the network or none, no
 * capability, never pulled.
 */
export function containerOptions(run: SandboxRun, asUser = true): string[] {
  // --pull never: an image not on the engine fails at once (no registry may answer: no wait on one).
  const args = ['-i', '--init', '--pull', 'never', '--name', run.container];
  args.push('--label', `${STORE_LABEL}=${run.store}`);
  const uid = process.getuid?.();
  if (uid !== undefined && asUser) args.push('--user', `${uid}:${process.getgid?.() ?? uid}`);
  // The host's network, as bwrap shares it: the run's channel listens on the host's loopback.
  args.push('--network', run.sandbox.network ? 'host' : 'none');
  // No capability, as under bwrap: root in it (as CI runs) must not read the host's traffic
  // (NET_RAW on the host's network) or write past file modes.
  args.push('--cap-drop', 'ALL', '--security-opt', 'no-new-privileges');
  return args;
}

/** The child's variables, by name only: the engine's client reads each value from its own environment, which is the child's. */
export const containerEnvArgs = (env: SandboxRun['env']): string[] =>
  Object.keys(env)
    .sort()
    .filter((name) => !HOST_ONLY_ENV.has(name))
    .flatMap((name) => ['-e', name]);

function containerCommand(run: SandboxRun): WrappedCommand {
  const engine = run.sandbox.mode;
  const client = engineClient(run);
  const { binds, cwd } = sandboxBinds(run, run.env.HOME, []);
  const args = [...client.args, 'run', '--rm', ...containerOptions(run)];
  for (const bind of binds) {
    // -v splits on ':'; a path with one cannot be said there.
    if (bind.path.includes(':'))
      throw new SandboxError(`${engine} cannot mount ${bind.path}: its path holds a ':'; rename it or use bwrap`);
    // The engine orders its mounts by depth too: a hidden folder's empty tmpfs, then what is bound back in it.
    // podman fills a tmpfs with what was below it unless told not to (`notmpcopyup`): the store would show.
    if (bind.as === 'hide')
      args.push(
        ...(isDirectory(bind.path)
          ? ['--tmpfs', engine === 'podman' ? `${bind.path}:notmpcopyup` : bind.path]
          : ['-v', `/dev/null:${bind.path}:ro`]),
      );
    else args.push('-v', `${bind.path}:${bind.path}${bind.as === 'write' ? '' : ':ro'}`);
  }
  args.push('-w', cwd, ...containerEnvArgs(run.env));
  const image = run.sandbox.image!;
  args.push(image, run.executable, ...run.args);
  return {
    file: client.file,
    args,
    // Removed, not only killed: the client that would remove it (--rm) is ended with the job's group.
    stop: () => engineCommand(client.file, [...client.args, ...removeArgs(engine, run.container)], run.env),
    explainFailure: ({ exitCode, stderr }) => containerFailure(engine, image, run.executable, exitCode, stderr),
  };
}

/** `doctor`'s check of an image: the CLI's `--version` in it, never pulled, without network. */
export const imageProbeArgs = (image: string, executable: string): string[] => [
  'run',
  '--rm',
  '--pull',
  'never',
  '--network',
  'none',
  image,
  executable,
  '--version',
];

/**
 * What the engine's exit code and error say went wrong around the CLI, as what to change; undefined
 * when the CLI itself ran and failed. Docker and podman exit 125 when they could not run the
 * container, 126/127 when its command cannot be run or found, 137 when it was killed.
 */
export function containerFailure(
  engine: SandboxMode,
  image: string,
  executable: string,
  exitCode: number | null,
  stderr: string,
): string | undefined {
  const said = stderr
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("Run '"))
    .at(-1);
  const cause = said ? ` (${said.slice(0, 300)})` : '';
  // The container's init (docker's tini, podman's catatonit) could not start the CLI: it exits 127, or 1.
  if (/^\[FATAL tini \(\d+\)\] exec .* failed|^ERROR \(catatonit:\d+\): failed to exec/m.test(stderr))
    return `the image ${image} cannot run \`${executable}\`${cause}: install the CLI in the image, on its PATH, or name an image that has it`;
  if (exitCode === 125 || exitCode === 126 || exitCode === 127) {
    if (/no such image|image not known|unable to find image/i.test(stderr))
      return `the image ${image} is not on this ${engine} engine${cause}, and polyspawn does not pull one while an agent waits: \`${engine} pull ${image}\` (or build it there), then spawn again`;
    // ssh's own refusals, before the engine is reached: what to fix is the ssh login, not the
    // engine. docker says ssh's words last, after its own long line: the end is kept.
    if (
      /Host key verification failed|Permission denied \(|No ED25519 host key is known|REMOTE HOST IDENTIFICATION HAS CHANGED/.test(
        stderr,
      )
    )
      return `ssh did not let the ${engine} client reach its engine (${(said ?? stderr.trim()).slice(-300)}): make \`ssh <user>@<host> ${engine} version\` work without a prompt where polyspawn runs (its key in ssh-agent or ~/.ssh/config, the host in known_hosts)`;
    if (/cannot connect|daemon running|unable to connect|connection refused|no such host/i.test(stderr))
      return `no ${engine} engine answers${cause}: start it (\`systemctl start ${engine}\`), or choose another sandbox`;
    if (exitCode === 127 || /executable file not found|exec .*(failed|not found)/i.test(stderr))
      return `the image ${image} cannot run \`${executable}\`${cause}: install the CLI in the image, on its PATH, or name an image that has it`;
    return `${engine} could not run the container${cause}`;
  }
  if (exitCode === 137)
    return `its container was killed (exit 137: \`${engine} kill\`, the engine stopped or restarted, or out of memory)${cause}`;
  // SIGTERM to the container's first process, what a stop sends: the CLI did not end on its own.
  if (exitCode === 143)
    return `its container was stopped (exit 143: \`${engine} stop\`, or the engine stopped or restarted)${cause}`;
  return undefined;
}

/**
 * A container removed now, running or not: docker's `rm -f` kills it; podman's stops it first,
 * waiting 10 s for the CLI to end on SIGTERM, unless told no time (`--time 0`).
 */
export const removeArgs = (mode: SandboxMode, name: string): string[] => [
  'rm',
  '-f',
  ...(mode === 'podman' ? ['--time', '0'] : []),
  name,
];

/** Removes a container a dead server left behind (restart recovery); nothing when there is none. */
export function removeContainer(
  sandbox: Pick<SandboxSettings, 'mode' | 'engine'>,
  name: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<void> {
  const found = which.sync(sandbox.mode, { path: env.PATH, nothrow: true });
  return found
    ? engineCommand(found, [...engineArgs(sandbox.mode, sandbox.engine), ...removeArgs(sandbox.mode, name)], env)
    : Promise.resolve();
}

const ENGINE_COMMAND_MS = 10_000;

export function engineCommand(file: string, args: string[], env: Readonly<Record<string, string | undefined>>) {
  return new Promise<void>((resolve) => {
    execFile(file, args, { env, timeout: ENGINE_COMMAND_MS }, () => resolve());
  });
}

/**
 * Every path the agent sees besides the system's, in the order to mount them, and its folder
 * (links resolved, as the binds are). Read-write: its folder (a worktree job's whole worktree),
 * the run's folder, the CLI's state, the `mounts` that say so; in each of them a repository's
 * `.git` stays read-only, so nothing the agent writes there runs in the user's later git.
 * Hidden: `run.hidden` wherever a bound folder holds it, with the run's folder and worktree
 * bound back in the store. Refused: a path that holds the home folder, or lies in a hidden one.
 */
export function sandboxBinds(
  run: SandboxRun,
  home: string | undefined,
  install: Bind[],
): { binds: Bind[]; links: Bind[]; cwd: string } {
  if (home) refuseHomeInside(run.cwd, home, "the agent's folder");
  const cwd = realpathSync(run.cwd);
  const worktree = run.worktree && isInside(run.worktree, cwd) ? realpathSync(run.worktree) : undefined;
  const runDir = realpathSync(run.runDir);
  const folders: Bind[] = [
    { path: worktree ?? cwd, as: 'write', what: "the agent's folder" },
    { path: runDir, as: 'write' },
  ];
  const wanted = [...install, ...stateBinds(run, home), ...folders, ...extraMounts(run, home)].map((bind) => {
    const [given, real] = [resolve(bind.path), realpathSync(bind.path)];
    return { ...bind, path: real, ...(given !== real ? { link: given } : {}) };
  });
  const binds = [...wanted, ...wanted.flatMap((bind) => (bind.as === 'write' ? gitBinds(bind) : []))];
  const own = [runDir, ...(worktree ? [worktree] : [])];
  const hidden = run.hidden.flatMap((path) => realpathOrUndefined(path) ?? []);
  for (const bind of binds) {
    if (bind.as === 'hide') continue;
    const what = bind.what ?? bind.path;
    if (home) refuseHomeInside(bind.path, home, what);
    const hider = hidden.find((h) => isInside(h, bind.path) && !own.some((o) => isInside(o, bind.path)));
    if (hider)
      throw new SandboxError(
        `${what} (${bind.path}) lies in ${hider}, which a sandbox hides from agents (the run store, the agents' definitions, key and config files): choose a folder outside it`,
      );
  }
  // A hidden path in another one is gone with it.
  const hides = hidden.filter(
    (h) => binds.some((b) => b.as !== 'hide' && isInside(b.path, h)) && !hidden.some((o) => o !== h && isInside(o, h)),
  );
  const all = ordered([...binds, ...hides.map((path) => ({ path, as: 'hide' as const }))]);
  // A link is made where no bind (nor a link above it) already leads to it.
  const links: Bind[] = [];
  for (const bind of all.filter((b) => b.link))
    if (!all.some((b) => under(b.path, bind.link!)) && !links.some((l) => under(l.link!, bind.link!))) links.push(bind);
  return { binds: all, links, cwd };
}

/**
 * A read-write folder's repository, kept read-only: its `.git` folder (config, hooks, objects,
 * refs: what the user's later git runs and trusts), or its `.git` file, so the folder cannot be
 * pointed at a git folder the agent built. A linked worktree's git folders (the repository's
 * common folder and its own admin folder, the other worktrees' hidden) are bound read-only too,
 * so git reads (status, diff, log) work in it; a `.git` file that names anything else binds
 * nothing more. A folder inside a git folder cannot be written at all.
 */
function gitBinds(folder: Bind): Bind[] {
  for (let dir = folder.path; ; dir = dirname(dir)) {
    if (basename(dir) === '.git' || isGitDir(dir))
      throw new SandboxError(
        `${folder.what ?? folder.path} (${folder.path}) lies in the git folder ${dir}, which a sandbox keeps read-only: choose the checkout's folder`,
      );
    if (dir === dirname(dir)) break;
  }
  const dotGit = join(folder.path, '.git');
  const stat = lstatOrUndefined(dotGit);
  if (!stat) return [];
  if (stat.isSymbolicLink())
    throw new SandboxError(
      `${dotGit} is a link, which a sandbox cannot keep from being repointed: replace it with the folder it leads to`,
    );
  const binds: Bind[] = [{ path: dotGit, as: 'read', git: true }];
  if (stat.isDirectory()) return binds;
  // A linked worktree: `gitdir: <common>/worktrees/<name>`, and that folder's `gitdir` names this file back.
  const named = /^gitdir: (.+)$/m.exec(readIfSmall(dotGit))?.[1];
  const admin = named && realpathOrUndefined(resolve(folder.path, named.trim()));
  if (!admin || basename(dirname(admin)) !== 'worktrees') return binds;
  const common = dirname(dirname(admin));
  const back = readIfSmall(join(admin, 'gitdir')).trim();
  if (!isGitDir(common) || !back || realpathOrUndefined(back) !== dotGit) return binds;
  return [
    ...binds,
    { path: common, as: 'read', git: true },
    { path: join(common, 'worktrees'), as: 'hide' },
    { path: admin, as: 'read', git: true },
  ];
}

/** A git folder (a `.git`, a bare repository): what git itself looks for. */
const isGitDir = (dir: string): boolean =>
  lstatOrUndefined(join(dir, 'HEAD'))?.isFile() === true &&
  isDirectory(join(dir, 'objects')) &&
  isDirectory(join(dir, 'refs'));

/** A small file's text ('' when it is missing or not small): a `.git` file, a worktree's `gitdir`. */
function readIfSmall(path: string): string {
  try {
    return statSync(path).size <= 4096 ? readFileSync(path, 'utf8') : '';
  } catch {
    return '';
  }
}

/**
 * Node's installation, from its real path: the prefix (<prefix>/bin/node) when it is one (it has
 * lib/node_modules or include/node) and does not hold the home folder, else the binary alone:
 * ~/bin/node must not show the home folder.
 */
function nodeInstall(realNode: string, home: string | undefined): string {
  const prefix = dirname(dirname(realNode));
  const isPrefix =
    basename(dirname(realNode)) === 'bin' &&
    (isDirectory(join(prefix, 'lib', 'node_modules')) || isDirectory(join(prefix, 'include', 'node')));
  return isPrefix && !(home && isInside(prefix, home)) ? prefix : realNode;
}

/** A CLI without network cannot reach its vendor; only a model API on the sandbox's own loopback could answer it. */
function refuseWithoutModelApi(run: SandboxRun): void {
  if (run.modelEndpointEnv.some((name) => isLoopbackUrl(run.env[name]))) return;
  const names = run.modelEndpointEnv.join(' or ');
  throw new SandboxError(
    `network: false leaves ${run.executable} no way to its model API (no network at all, the host's loopback included), so it could only fail or wait until its time-out: allow the network in this sandbox${names ? `, or set ${names} to a model server on the sandbox's own loopback (one its image runs)` : ''}`,
  );
}

function isLoopbackUrl(value: string | undefined): boolean {
  if (!value) return false;
  try {
    return isLoopbackHost(new URL(value).hostname);
  } catch {
    return false;
  }
}

/** The backend's config and login folders and files, read-write; a missing folder is made, a missing file left out. */
function stateBinds(run: SandboxRun, home: string | undefined): Bind[] {
  if (!run.paths || !home) return [];
  const { dirs, files } = run.paths.state(run.env, home);
  for (const dir of dirs) makeDirs(dir);
  const what = `${run.executable}'s state`;
  return [...dirs, ...files.filter((f) => lstatOrUndefined(f))].map((path) => ({ path, as: 'write', what }));
}

/** The definition's and config's mounts; `~/` is the home folder. Each must exist. */
function extraMounts(run: SandboxRun, home: string | undefined): Bind[] {
  return run.sandbox.mounts.map((mount) => {
    if (mount.path.startsWith('~/') && !home)
      throw new SandboxError(`mount ${mount.path}: HOME is not set, so ~ means nothing: give an absolute path`);
    const path = mount.path.startsWith('~/') ? join(home!, mount.path.slice(2)) : mount.path;
    if (!lstatOrUndefined(path)) throw new SandboxError(`mount ${path} does not exist: create it or remove the mount`);
    return { path, as: mount.write ? 'write' : 'read', what: `mount ${mount.path}` };
  });
}

/** A folder that holds the home folder would show all of it. */
function refuseHomeInside(path: string, home: string, what: string): void {
  if (isInside(path, home))
    throw new SandboxError(
      `${what} (${path}) holds your home folder (${home}), which a sandbox keeps out: use a folder inside the project`,
    );
}

/** Parents before children (a later bind hides what an earlier one put below it); one bind per path, the last said. */
function ordered(binds: Bind[]): Bind[] {
  const byPath = new Map<string, Bind>();
  for (const bind of binds) {
    byPath.delete(bind.path);
    byPath.set(bind.path, bind);
  }
  const depth = (p: string) => p.split(sep).length;
  return [...byPath.values()].sort((a, b) => depth(a.path) - depth(b.path));
}

const isDirectory = (path: string) => lstatOrUndefined(path)?.isDirectory() === true;

/** `path` is `folder` or below it, as written (no link resolved). */
const under = (folder: string, path: string) =>
  path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);

function realExecutable(file: string, env: SandboxRun['env']): string {
  const found = which.sync(file, { path: env.PATH, nothrow: true });
  if (!found) throw Object.assign(new SandboxError(`${file} is not on PATH`), { missingCli: true });
  return realpathSync(found);
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function realpathOrUndefined(path: string): string | undefined {
  try {
    return statSync(path) && realpathSync(path);
  } catch {
    return undefined;
  }
}
