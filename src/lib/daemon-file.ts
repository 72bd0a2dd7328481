// The files of a project's shared server (its daemon) in the state folder: `daemon.json` says
// where it listens and which process it is, so that `polyspawn serve` (stdio) relays to it and
// `polyspawn daemon` finds it; `http-token` holds the bearer token its clients send; `daemon.lock`
// is held while it serves, so two started at once for one project cannot both serve.
import { randomBytes, timingSafeEqual, createHash } from 'node:crypto';
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lock } from './lock.js';
import { SetupError } from './errors.js';
import { makeDirs, PRIVATE_FILE, writeAtomic } from './fs.js';
import { processStart, sameProcessAlive } from './proc.js';
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

/** The daemon that daemon.json names, if that process is still alive; undefined when none or stale. */
export function runningDaemon(stateDir: string): DaemonInfo | undefined {
  const info = readDaemonFile(stateDir);
  return info && sameProcessAlive(info.pid, info.start) ? info : undefined;
}

/** daemon.json as written, alive or not. */
export function readDaemonFile(stateDir: string): DaemonInfo | undefined {
  try {
    const info = JSON.parse(readFileSync(daemonFile(stateDir), 'utf8')) as Partial<DaemonInfo>;
    if (typeof info.url !== 'string' || typeof info.pid !== 'number' || typeof info.port !== 'number') return undefined;
    return info as DaemonInfo;
  } catch {
    return undefined;
  }
}

export function writeDaemonFile(stateDir: string, url: string, port: number): DaemonInfo {
  const start = processStart(process.pid);
  const info: DaemonInfo = {
    url,
    port,
    pid: process.pid,
    ...(start ? { start } : {}),
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
  const stat = statSync(file, { throwIfNoEntry: false });
  if (stat) {
    if ((stat.mode & 0o077) !== 0) {
      throw new SetupError(
        `${file} can be read or written by other users (mode ${(stat.mode & 0o777).toString(8)}): it holds the token to this project's polyspawn; run \`chmod 600 ${file}\`, or delete it for a new token`,
      );
    }
    const token = readFileSync(file, 'utf8').trim();
    if (token) return token;
  }
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
