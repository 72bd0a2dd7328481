// Where polyspawn keeps what makes its start fast, in the user's cache folder, and its V8 start-up
// snapshot (issue 19): a blob holding the bundled server already evaluated (the SDK, the zod
// schemas), which `node --snapshot-blob <blob> cli.js` deserializes instead of running the bundle.
//
// Node 20.20 gives no second chance with a blob (measured): a missing one exits 14 ("Cannot
// open"), one made by another node or with other V8 flags exits 14, a damaged one dies of
// SIGTRAP (V8's checksum), a truncated one of SIGSEGV, a foreign file of SIGABRT. So a client
// config never names a blob: it names the snapshot's launcher, a shell script written beside the
// blob that execs node with the blob only when node, the bundle and the blob are the very files it
// was made from (device, inode, size, mtime, one `stat`) and NODE_OPTIONS is empty (it may carry
// V8 flags), and without it otherwise. The launcher's path stays the same for one installation
// and one node, so a rebuilt blob needs no new config.
//
// Made by `npm run build` (scripts/bundle.mjs), `polyspawn init`, and in the background by a
// `serve` that started without it; always by `node dist/src/snapshot.cjs` (src/snapshot.ts), which
// builds the blob, starts it once to see it works, and only then renames it in place and writes
// the launcher. Not on Windows (no sh).
//
// Opt-in: POLYSPAWN_SNAPSHOT=1 (the user cache folder) or a folder. Measured on Node 20.20 here, a
// start from it is no faster than one through the code cache (its 9 MB heap is deserialized and
// its functions compiled again), and a client config that names a file in a cache folder breaks
// when the cache is cleared; so neither build, init nor serve makes one unless asked.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { makeDirs, writeAtomic } from './fs.js';

/** The files of one installation and the node that runs it. */
export type SnapshotInstall = {
  /** The node binary (process.execPath). */
  node: string;
  /** dist/src/cli.js, the code-cache start. */
  cli: string;
  /** dist/src/cli.bundle.cjs, what the snapshot holds evaluated. */
  bundle: string;
  /** dist/src/snapshot.cjs: the entry of `--build-snapshot`, and the maker when run by itself. */
  entry: string;
};

/** The files of one installation's snapshot in the cache folder. */
export type SnapshotPlaces = {
  dir: string;
  launcher: string;
  blob: string;
  lock: string;
  failed: string;
  stem: string;
};

/** The launcher's record of what it checks, one comment line of it (read back by `snapshotState`). */
type Record_ = { node: string; bundle: string; blob: string; want: string };
const RECORD_MARK = '# polyspawn-snapshot ';

/** FNV-1a: a short, stable name for a path (a collision costs a rebuild, nothing more). */
export function fnv(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

/**
 * The user cache folder: `$variable` when set (0 turns the feature off), else
 * $XDG_CACHE_HOME/polyspawn or ~/.cache/polyspawn; undefined without a home folder (never a
 * shared folder such as /tmp).
 */
export function cacheDir(env: NodeJS.ProcessEnv, variable: string): string | undefined {
  const setting = env[variable];
  if (setting === '0') return undefined;
  if (setting) return setting;
  try {
    return join(
      env.XDG_CACHE_HOME || (process.platform === 'win32' && env.LOCALAPPDATA) || join(homedir(), '.cache'),
      'polyspawn',
    );
  } catch {
    return undefined;
  }
}

export const SNAPSHOT_VARIABLE = 'POLYSPAWN_SNAPSHOT';

export function snapshotPlaces(env: NodeJS.ProcessEnv, install: SnapshotInstall): SnapshotPlaces | undefined {
  const setting = env[SNAPSHOT_VARIABLE];
  if (process.platform === 'win32' || !setting || setting === '0') return undefined;
  const dir = setting === '1' ? cacheDir({ ...env, [SNAPSHOT_VARIABLE]: undefined }, SNAPSHOT_VARIABLE) : setting;
  if (!dir) return undefined;
  const stem = `snapshot-${fnv(`${install.bundle}\0${install.node}`)}`;
  return {
    dir,
    stem,
    launcher: join(dir, `${stem}.sh`),
    blob: join(dir, `${stem}-${process.version}-${process.arch}.blob`),
    lock: join(dir, `${stem}.lock`),
    failed: join(dir, `${stem}.failed`),
  };
}

/** What `stat` prints for the files, as the launcher compares it: device, inode, size, mtime (s). */
function identity(files: string[]): string | undefined {
  try {
    return files
      .map((file) => {
        const s = statSync(file, { bigint: true });
        return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs / 1000n}`;
      })
      .join('\n');
  } catch {
    return undefined;
  }
}

const STAT = process.platform === 'linux' ? ['-L', '-c', '%d:%i:%s:%Y'] : ['-L', '-f', '%d:%i:%z:%m'];
const quote = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

function launcherText(install: SnapshotInstall, record: Record_): string {
  return `#!/bin/sh
# Written by polyspawn: starts its MCP server from a V8 start-up snapshot when node, the bundle and
# the snapshot are the very files it was made from and NODE_OPTIONS is empty, else without it.
# ${SNAPSHOT_VARIABLE}=0 in the environment: never from the snapshot.
${RECORD_MARK}${JSON.stringify(record)}
node=${quote(install.node)}
cli=${quote(install.cli)}
blob=${quote(record.blob)}
if [ -z "$NODE_OPTIONS" ] && [ "$${SNAPSHOT_VARIABLE}" != 0 ] && [ "$(stat ${STAT.map(quote).join(' ')} "$node" ${quote(record.bundle)} "$blob" 2>/dev/null)" = ${quote(record.want)} ]; then
  exec "$node" --snapshot-blob "$blob" "$cli" "$@"
fi
exec "$node" "$cli" "$@"
`;
}

function readRecord(launcher: string): Record_ | undefined {
  try {
    const line = readFileSync(launcher, 'utf8')
      .split('\n')
      .find((l) => l.startsWith(RECORD_MARK));
    return line ? (JSON.parse(line.slice(RECORD_MARK.length)) as Record_) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a launcher would start from its snapshot now (NODE_OPTIONS aside). */
function recordHolds(record: Record_ | undefined): boolean {
  return !!record && identity([record.node, record.bundle, record.blob]) === record.want;
}

/**
 * 'current': this installation's launcher starts this node from a snapshot of this bundle;
 * 'missing': there is none, or it is stale (it would start without); 'off': no snapshot here.
 */
export function snapshotState(
  env: NodeJS.ProcessEnv,
  install: SnapshotInstall,
): { state: 'current' | 'missing'; places: SnapshotPlaces } | { state: 'off' } {
  const places = snapshotPlaces(env, install);
  if (!places) return { state: 'off' };
  const record = readRecord(places.launcher);
  const mine = record?.node === install.node && record.bundle === install.bundle && record.blob === places.blob;
  return { state: mine && recordHolds(record) ? 'current' : 'missing', places };
}

/** The environment a blob is made and checked in: no NODE_OPTIONS, whose V8 flags would go into it. */
function cleanEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { NODE_OPTIONS: _flags, ...rest } = env;
  return rest;
}

/** A lock older than this was left by a maker that died: taken over. */
const LOCK_STALE_MS = 10 * 60 * 1000;
/** Other installations' launchers that no longer hold, untouched this long, go with their blobs. */
const STALE_MS = 7 * 24 * 3600 * 1000;

function takeLock(lock: string): boolean {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      closeSync(openSync(lock, 'wx', 0o600));
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age < LOCK_STALE_MS) return false;
      rmSync(lock, { force: true });
    }
  }
  return false;
}

/** The error of a node that failed: its `Error:` line, or its last line. */
const tail = (text: string | Buffer | null | undefined) => {
  const lines = String(text ?? '')
    .trim()
    .split('\n');
  return lines.find((l) => /^\w*Error\b/.test(l)) ?? lines.at(-1) ?? '';
};

/**
 * Builds this installation's snapshot for this node, checks that it starts, then puts it and its
 * launcher in place (each by rename). Returns the launcher, or why there is none. Synchronous:
 * a second or two of CPU.
 */
export function makeSnapshot(
  env: NodeJS.ProcessEnv,
  install: SnapshotInstall,
  version: string,
): { launcher: string } | { reason: string } {
  const places = snapshotPlaces(env, install);
  if (!places)
    return {
      reason:
        process.platform === 'win32'
          ? 'no start-up snapshot on Windows'
          : `off (${SNAPSHOT_VARIABLE}=1 or a folder turns it on)`,
    };
  try {
    makeDirs(places.dir);
    if (!takeLock(places.lock)) return { reason: `another process is making it (${places.lock})` };
  } catch (error) {
    return { reason: `${places.dir} is not writable: ${(error as Error).message}` };
  }
  try {
    const made = buildAndPlace(env, install, places, version);
    if ('reason' in made) writeFailure(places, install, made.reason);
    else rmSync(places.failed, { force: true });
    return made;
  } finally {
    rmSync(places.lock, { force: true });
  }
}

/**
 * A failure is remembered for this node and bundle, so that a `serve` does not start the maker
 * again at every start (`npm run build` and `polyspawn init` try again regardless).
 */
function writeFailure(places: SnapshotPlaces, install: SnapshotInstall, reason: string): void {
  try {
    writeAtomic(places.failed, `${identity([install.node, install.bundle])}\n${reason}\n`);
  } catch {
    // remembered or not, there is no snapshot
  }
}

function failedBefore(places: SnapshotPlaces, install: SnapshotInstall): boolean {
  try {
    return readFileSync(places.failed, 'utf8').startsWith(`${identity([install.node, install.bundle])}\n`);
  } catch {
    return false;
  }
}

function buildAndPlace(
  env: NodeJS.ProcessEnv,
  install: SnapshotInstall,
  places: SnapshotPlaces,
  version: string,
): { launcher: string } | { reason: string } {
  const tmp = `${places.blob}.${process.pid}.tmp`;
  try {
    const clean = cleanEnv(env);
    const built = spawnSync(install.node, ['--snapshot-blob', tmp, '--build-snapshot', install.entry], {
      env: clean,
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 180_000,
    });
    if (built.status !== 0)
      return { reason: `building it failed: ${tail(built.stderr) || built.signal || built.error}` };
    const tried = spawnSync(install.node, ['--snapshot-blob', tmp, install.cli, '--version'], {
      env: clean,
      encoding: 'utf8',
      timeout: 60_000,
    });
    if (tried.status !== 0 || tried.stdout.trim() !== version)
      return { reason: `it did not start: ${tail(tried.stderr) || tried.signal || tried.stdout}` };
    renameSync(tmp, places.blob);
    const want = identity([install.node, install.bundle, places.blob]);
    const seen = spawnSync('stat', [...STAT, install.node, install.bundle, places.blob], { encoding: 'utf8' });
    if (!want || seen.status !== 0 || seen.stdout.trimEnd() !== want) {
      rmSync(places.blob, { force: true });
      return { reason: `\`stat ${STAT.join(' ')}\` prints ${tail(seen.stdout || seen.stderr)}, not ${want}` };
    }
    writeAtomic(
      places.launcher,
      launcherText(install, { node: install.node, bundle: install.bundle, blob: places.blob, want }),
    );
    prune(places);
    return { launcher: places.launcher };
  } catch (error) {
    return { reason: (error as Error).message };
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** This installation's blobs for other node versions, and other installations' gone for a week. */
function prune(places: SnapshotPlaces): void {
  for (const name of readdirSync(places.dir)) {
    const file = join(places.dir, name);
    if (name.startsWith(`${places.stem}-`) && name.endsWith('.blob') && file !== places.blob)
      rmSync(file, { force: true });
    if (!name.startsWith('snapshot-') || !name.endsWith('.sh') || file === places.launcher) continue;
    const record = readRecord(file);
    const age = Date.now() - (statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
    if (recordHolds(record) || age < STALE_MS) continue;
    const stem = name.slice(0, -'.sh'.length);
    for (const other of readdirSync(places.dir))
      if (other === name || other === `${stem}.failed` || (other.startsWith(`${stem}-`) && other.endsWith('.blob')))
        rmSync(join(places.dir, other), { force: true });
  }
}

/**
 * Starts the maker, detached, when this installation has no current snapshot: for a `serve` that
 * started without one. It never throws and never waits.
 */
export function makeSnapshotInBackground(env: NodeJS.ProcessEnv, install: SnapshotInstall): void {
  try {
    const found = snapshotState(env, install);
    if (found.state !== 'missing' || failedBefore(found.places, install)) return;
    const lock = statSync(found.places.lock, { throwIfNoEntry: false });
    if (lock && Date.now() - lock.mtimeMs < LOCK_STALE_MS) return;
    spawn(install.node, [install.entry], { detached: true, stdio: 'ignore', env: cleanEnv(env) }).unref();
  } catch {
    // no snapshot this time
  }
}
