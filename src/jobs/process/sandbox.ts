// A CLI's command wrapped in a sandbox (src/config/sandbox.ts says which): bubblewrap, or a
// docker/podman container. The wrapper is what the runner starts, so it leads the job's process
// group and everything else in a job's life (logs, time-out, cancel, the channel) is unchanged.
// Nothing secret goes into the wrapper's arguments: the child's environment is inherited
// (bwrap) or passed by name (`-e NAME`), never as values.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import which from 'which';
import type { SandboxPaths } from '../../../backends/types.js';
import type { SandboxMode, SandboxSettings } from '../../config/sandbox.js';
import { isInside, makeDirs } from '../../lib/fs.js';

/** What wrapping one run needs. */
export type SandboxRun = {
  sandbox: SandboxSettings;
  /** The backend's own folders and installation (CliBackend.sandboxPaths). */
  paths: SandboxPaths | undefined;
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
  /** The run store: read-only where it lies inside a bound folder, so an agent cannot rewrite records. */
  stateDir: string;
  /** The container's name (containerName). */
  container: string;
};

export type WrappedCommand = {
  file: string;
  args: string[];
  /** Ends what a kill of the process group cannot reach (a container its engine runs). */
  stop?: () => Promise<void>;
};

/** A sandbox that cannot start here; the message says what to change. */
export class SandboxError extends Error {
  /** The CLI itself was not found (its backend's install hint applies). */
  missingCli = false;
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
  return run.sandbox.mode === 'bwrap' ? bwrapCommand(run) : containerCommand(run);
}

/** A run's container, named after the run and its store: cancel, time-out and recovery find it by name. */
export function containerName(stateDir: string, id: string): string {
  return `polyspawn-${id}-${createHash('sha256').update(stateDir).digest('hex').slice(0, 8)}`;
}

/** The host's folders a CLI needs to run and to reach its vendor: read-only. */
const SYSTEM_PATHS = ['/usr', '/etc', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

type Bind = { path: string; write: boolean };

function bwrapCommand(run: SandboxRun): WrappedCommand {
  const bwrap = which.sync('bwrap', { path: run.env.PATH, nothrow: true });
  if (!bwrap) throw new SandboxError(`bwrap (bubblewrap) is not on PATH: ${BWRAP_INSTALL}`);
  const home = run.env.HOME;
  if (home) refuseHomeInside(run.cwd, home, "the agent's folder");
  const executable = realExecutable(run.file, run.env);
  const binds: Bind[] = [];
  if (run.paths) binds.push({ path: run.paths.install(executable), write: false });
  else binds.push({ path: dirname(executable), write: false });
  const node = which.sync('node', { path: run.env.PATH, nothrow: true });
  if (node) {
    const prefix = dirname(dirname(realpathSync(node)));
    if (!SYSTEM_PATHS.some((p) => isInside(p, prefix))) binds.push({ path: prefix, write: false });
  }
  binds.push(...stateBinds(run, home));
  binds.push({ path: run.cwd, write: true }, { path: run.runDir, write: true }, ...extraMounts(run, home));
  // Whichever read-write folder holds the store, the store stays read-only but for the run's own folder.
  if (binds.some((b) => b.write && isInside(b.path, run.stateDir) && b.path !== run.stateDir))
    binds.push({ path: run.stateDir, write: false });

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
  for (const bind of ordered(binds)) args.push(bind.write ? '--bind' : '--ro-bind', bind.path, bind.path);
  args.push('--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try');
  // bwrap started by root keeps every capability unless told: root in the sandbox must not
  // mount, trace or open files by handle past its binds.
  args.push('--cap-drop', 'ALL');
  if (!run.sandbox.network) args.push('--unshare-net');
  args.push('--chdir', run.cwd, '--', executable, ...run.args);
  return { file: bwrap, args };
}

/** Variables that describe the host, not the run: a container keeps its image's. */
const HOST_ONLY_ENV = new Set(['PATH', 'HOSTNAME', 'PWD', 'OLDPWD', 'SHLVL', '_', 'TERM', 'TMPDIR']);

function containerCommand(run: SandboxRun): WrappedCommand {
  const engine = run.sandbox.mode;
  const found = which.sync(engine, { path: run.env.PATH, nothrow: true });
  if (!found) throw new SandboxError(`${engine} is not on PATH: ${ENGINE_INSTALL[engine]}`);
  const home = run.env.HOME;
  if (home) refuseHomeInside(run.cwd, home, "the agent's folder");
  const binds = [
    ...stateBinds(run, home),
    { path: run.cwd, write: true },
    { path: run.runDir, write: true },
    ...extraMounts(run, home),
  ];
  const args = ['run', '--rm', '-i', '--init', '--name', run.container];
  const uid = process.getuid?.();
  if (uid !== undefined) args.push('--user', `${uid}:${process.getgid?.() ?? uid}`);
  if (!run.sandbox.network) args.push('--network', 'none');
  for (const bind of ordered(binds)) {
    // -v splits on ':'; a path with one cannot be said there.
    if (bind.path.includes(':'))
      throw new SandboxError(`${engine} cannot mount ${bind.path}: its path holds a ':'; rename it or use bwrap`);
    args.push('-v', `${bind.path}:${bind.path}${bind.write ? '' : ':ro'}`);
  }
  args.push('-w', run.cwd);
  // By name only: the engine reads each value from its own environment, which is the child's.
  for (const name of Object.keys(run.env).sort()) if (!HOST_ONLY_ENV.has(name)) args.push('-e', name);
  args.push(run.sandbox.image!, run.executable, ...run.args);
  return { file: found, args, stop: () => engineCommand(found, ['kill', run.container], run.env) };
}

/** Removes a container a dead server left behind (restart recovery); nothing when there is none. */
export function removeContainer(
  mode: SandboxMode,
  name: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<void> {
  const found = which.sync(mode, { path: env.PATH, nothrow: true });
  return found ? engineCommand(found, ['rm', '-f', name], env) : Promise.resolve();
}

const ENGINE_COMMAND_MS = 10_000;

function engineCommand(file: string, args: string[], env: Readonly<Record<string, string | undefined>>) {
  return new Promise<void>((resolve) => {
    execFile(file, args, { env, timeout: ENGINE_COMMAND_MS }, () => resolve());
  });
}

/** The backend's config and login folders and files, read-write; a missing folder is made, a missing file left out. */
function stateBinds(run: SandboxRun, home: string | undefined): Bind[] {
  if (!run.paths || !home) return [];
  const { dirs, files } = run.paths.state(run.env, home);
  for (const dir of dirs) makeDirs(dir);
  return [...dirs, ...files.filter((f) => lstatOrUndefined(f))].map((path) => ({ path, write: true }));
}

/** The definition's and config's mounts; `~/` is the home folder. Each must exist. */
function extraMounts(run: SandboxRun, home: string | undefined): Bind[] {
  return run.sandbox.mounts.map((mount) => {
    if (mount.path.startsWith('~/') && !home)
      throw new SandboxError(`mount ${mount.path}: HOME is not set, so ~ means nothing: give an absolute path`);
    const path = mount.path.startsWith('~/') ? join(home!, mount.path.slice(2)) : mount.path;
    if (!lstatOrUndefined(path)) throw new SandboxError(`mount ${path} does not exist: create it or remove the mount`);
    if (home) refuseHomeInside(path, home, `mount ${path}`);
    return { path, write: mount.write };
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
