// The files of a project's shared server (its daemon) in the state folder: `daemon.json` says
// where it listens and which process it is, so that `polyspawn serve` (stdio) relays to it and
// `polyspawn daemon` finds it; `http-token` holds the bearer token its clients send; `daemon.lock`
// is held while it serves, so two started at once for one project cannot both serve.
import { randomBytes, timingSafeEqual, createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, lstatSync, openSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lock } from './lock.js';
import { SetupError } from './errors.js';
import { makeDirs, PRIVATE_FILE, readAt, writeAtomic } from './fs.js';
import { processLaunch, processOwner, processStart, sameProcessAlive } from './proc.js';
import { isLoopbackHost, LISTENING, socketInodes, tcpSockets } from './sockets.js';
import { TOKEN_PREFIX } from './redact.js';

export type DaemonInfo = {
  /** The MCP endpoint: http://<host>:<port>/mcp */
  url: string;
  port: number;
  pid: number;
  /** The process's start (src/lib/proc.ts), so a reused pid is not taken for it. */
  start?: string;
  started_at: string;
};

/** The variable a client's config and a process hand the token in (never in argv or a file polyspawn did not make). */
export const TOKEN_ENV = 'POLYSPAWN_TOKEN';

export const daemonFile = (stateDir: string) => join(stateDir, 'daemon.json');
export const tokenFile = (stateDir: string) => join(stateDir, 'http-token');

/** What daemon.json says of the project's daemon, once its claims are checked (projectDaemon). */
export type DaemonState =
  | { state: 'none' }
  /** The file is not one this user's daemon wrote, or names no daemon of this user for this project: nothing of it is used. */
  | { state: 'untrusted'; why: string }
  /** Its process has ended. */
  | { state: 'ended'; info: DaemonInfo }
  /** `endpoint` is where it was seen listening: a loopback address, never a URL from the file. */
  | { state: 'running'; info: DaemonInfo; endpoint: string };

/** Larger than any daemon.json or http-token polyspawn writes. */
const MAX_DAEMON_FILE_BYTES = 4096;
const MAX_TOKEN_FILE_BYTES = 4096;

/**
 * The project's daemon, if daemon.json proves to name one: a file this user wrote (a regular
 * file, not a link, owned by this user, 0600 with one name, in a folder no one else may write),
 * naming a loopback URL and a live process that is this user's `polyspawn serve --http`, whose
 * state folder (from its own environment and working folder, through `stateDirOf`) is this one,
 * and that listens on the port the file names. A repository can ship a daemon.json and an agent
 * can write one; neither can make a process pass all of these. Where there is no /proc (not
 * Linux), the file's checks and a live pid are all there is. (A daemon started inside an agent
 * refuses to start: src/mcp/serve-http.ts.)
 */
export function projectDaemon(stateDir: string, stateDirOf: (pid: number) => string | undefined): DaemonState {
  const file = daemonFile(stateDir);
  const read = readPrivateFile(file, MAX_DAEMON_FILE_BYTES);
  if (read === undefined) return { state: 'none' };
  if ('refused' in read) return { state: 'untrusted', why: read.refused };
  // Not a link either: a repository's `.polyspawn` pointing at another project's state folder
  // would relay this project's client to that project's daemon.
  const folder = lstatSync(stateDir);
  if (!folder.isDirectory() || folder.mode & 0o022 || (process.getuid && folder.uid !== process.getuid())) {
    return { state: 'untrusted', why: `${stateDir} is not a folder (not a link) that only you may write to` };
  }
  const info = parseDaemonFile(read.text);
  if (typeof info === 'string') return { state: 'untrusted', why: `${file} ${info}` };
  if (!sameProcessAlive(info.pid, info.start)) return { state: 'ended', info };
  const proved = provedListening(info, stateDir, stateDirOf);
  return typeof proved === 'string'
    ? { state: 'untrusted', why: `${file} names pid ${info.pid}, which ${proved}` }
    : { state: 'running', info, endpoint: proved.endpoint };
}

/** daemon.json's fields, or what is wrong with them. */
function parseDaemonFile(text: string): DaemonInfo | string {
  let info: Partial<DaemonInfo>;
  try {
    info = JSON.parse(text) as Partial<DaemonInfo>;
  } catch {
    return 'is not JSON';
  }
  if (typeof info !== 'object' || info === null) return 'is not an object';
  const { url, port, pid, start, started_at } = info;
  if (!Number.isInteger(pid) || pid! <= 1) return 'names no process (pid)';
  if (!Number.isInteger(port) || port! < 1 || port! > 65535) return 'names no port';
  if (start !== undefined && typeof start !== 'string') return 'has a malformed start';
  if (process.platform === 'linux' && start === undefined) return "names no process start (every daemon's has one)";
  if (typeof url !== 'string' || url !== loopbackUrl(url, port!))
    return 'names a URL that is not http://<loopback>:<port>/mcp';
  return { url, port: port!, pid: pid!, ...(start ? { start } : {}), started_at: String(started_at) };
}

/** The URL when it is http on a loopback address and this port at /mcp, with nothing else in it; else undefined. */
function loopbackUrl(url: string, port: number): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  const loopback = isLoopbackHost(parsed.hostname);
  const plain = !parsed.username && !parsed.password && !parsed.search && !parsed.hash && parsed.pathname === '/mcp';
  return parsed.protocol === 'http:' && loopback && plain && parsed.port === String(port) ? url : undefined;
}

/** How the relay reaches a daemon seen listening on a loopback or wildcard address. */
const endpointFor = (family: 4 | 6, port: number) =>
  family === 6 ? `http://[::1]:${port}/mcp` : `http://127.0.0.1:${port}/mcp`;

/** The live process is this user's polyspawn daemon for this state folder, listening on its port: where to reach it, or why not. */
function provedListening(
  info: DaemonInfo,
  stateDir: string,
  stateDirOf: (pid: number) => string | undefined,
): { endpoint: string } | string {
  if (process.platform !== 'linux') return { endpoint: info.url };
  if (processOwner(info.pid) !== process.getuid?.()) return 'is not a process of yours';
  const sockets = tcpSockets(info.pid);
  const launch = processLaunch(info.pid);
  if (!launch) return 'is not readable here';
  const serve = launch.argv.indexOf('serve');
  if (serve < 0 || !launch.argv.slice(serve + 1).includes('--http')) return 'is not `polyspawn serve --http`';
  const itsStateDir = stateDirOf(info.pid);
  if (itsStateDir === undefined) return 'has a config that cannot be read here (so its project is not known)';
  if (!sameFolder(itsStateDir, stateDir)) return 'serves another project';
  const held = socketInodes(info.pid);
  const listening = sockets?.find((s) => s.state === LISTENING && s.localPort === info.port && held.has(s.inode));
  if (!listening) return `does not listen on port ${info.port}`;
  if (listening.localKind === 'other') return `listens on port ${info.port} of an address that is not loopback`;
  return { endpoint: endpointFor(listening.family, info.port) };
}

const sameFolder = (a: string, b: string) => {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
};

/** daemon.json as written, alive or not, unchecked: only for saying where a daemon that holds the lock listens. */
function readDaemonFile(stateDir: string): DaemonInfo | undefined {
  const read = readPrivateFile(daemonFile(stateDir), MAX_DAEMON_FILE_BYTES);
  const info = read && 'text' in read ? parseDaemonFile(read.text) : undefined;
  return typeof info === 'object' ? info : undefined;
}

/**
 * A file only this user may have written: a regular file (not a link, a FIFO or a device) of
 * at most `maxBytes`, owned by this user, with no permission for others and no second name.
 * undefined when there is none.
 */
function readPrivateFile(path: string, maxBytes: number): { text: string } | { refused: string } | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    return { refused: code === 'ELOOP' ? `${path} is a link` : `${path} cannot be read (${code})` };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { refused: `${path} is not a regular file` };
    if (process.getuid && stat.uid !== process.getuid()) return { refused: `${path} is not yours` };
    if (stat.mode & 0o077) {
      return {
        refused: `${path} can be read or written by other users (mode ${(stat.mode & 0o777).toString(8)}), so polyspawn did not write it`,
      };
    }
    if (stat.nlink !== 1) return { refused: `${path} has another name (a hard link)` };
    if (stat.size > maxBytes) return { refused: `${path} is larger than polyspawn writes it` };
    return { text: readAt(fd, 0, maxBytes).toString('utf8') };
  } finally {
    closeSync(fd);
  }
}

export function writeDaemonFile(stateDir: string, url: string, port: number): DaemonInfo {
  const start = processStart(process.pid);
  const info: DaemonInfo = {
    url,
    port,
    pid: process.pid,
    start,
    started_at: new Date().toISOString(),
  };
  writeAtomic(daemonFile(stateDir), `${JSON.stringify(info, null, 2)}\n`);
  return info;
}

/** Removes daemon.json if it still names this process (a newer daemon's is left alone). */
export function removeDaemonFile(stateDir: string): void {
  if (readDaemonFile(stateDir)?.pid === process.pid) rmSync(daemonFile(stateDir), { force: true });
}

/**
 * Holds `daemon.lock` while this process serves the project over HTTP; a second server fails
 * here with where the first one listens. The lock goes stale when its holder dies (even by SIGKILL).
 */
export async function lockDaemon(stateDir: string): Promise<() => Promise<void>> {
  makeDirs(stateDir);
  try {
    // Locked under a name of its own: proper-lockfile keeps its locks by that name, and IAC.md's
    // lock is taken on the state folder itself.
    return await lock(join(stateDir, 'daemon'), {
      lockfilePath: join(stateDir, 'daemon.lock'),
      realpath: false,
      // A holder killed with SIGKILL leaves the lock behind: stale once it has not been touched
      // for 4 s; tried for a little longer than that, so a daemon started right after gets it.
      stale: 4_000,
      update: 1_000,
      retries: { retries: 6, minTimeout: 1_000, maxTimeout: 1_000 },
      onCompromised: () => undefined,
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error;
    const other = readDaemonFile(stateDir);
    throw new SetupError(
      `another polyspawn server already serves this project over HTTP${other ? ` (pid ${other.pid}, ${other.url})` : ''}: use it, or stop it with \`polyspawn daemon stop\``,
    );
  }
}

/**
 * The bearer token clients must send: POLYSPAWN_TOKEN when set, else the project's token file,
 * made on first start (0600). A token file others can read or write is refused, not used.
 */
export function projectToken(stateDir: string, env: NodeJS.ProcessEnv, create: boolean): string | undefined {
  const given = env[TOKEN_ENV]?.trim();
  if (given) return given;
  const file = tokenFile(stateDir);
  const read = readPrivateFile(file, MAX_TOKEN_FILE_BYTES);
  if (read && 'refused' in read) {
    throw new SetupError(
      `${read.refused}: it should hold the token to this project's polyspawn; delete it for a new token (or \`chmod 600 ${file}\` if it is yours)`,
    );
  }
  const saved = read?.text.trim();
  if (saved) return saved;
  if (!create) return undefined;
  makeDirs(stateDir);
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  writeFileSync(file, `${token}\n`, { mode: PRIVATE_FILE });
  return token;
}

/** Whether `given` is `expected`, compared by digest (the time taken says nothing of how close a guess was). */
export function tokenMatches(expected: string, given: string): boolean {
  const digest = (token: string) => createHash('sha256').update(token).digest();
  return timingSafeEqual(digest(expected), digest(given));
}
