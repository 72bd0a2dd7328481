// Can polyspawn write where it keeps its records? Asked once at start, without writing
// anything (a project that never runs an agent gets no .polyspawn/ folder): the nearest
// existing folder on the way must be writable, and its disk not full. A server whose store or
// IAC.md cannot be written still runs agents and answers for them while it runs; this says so
// at once, instead of on every job. makeDirs makes the folders, where Node's recursive mkdir can
// loop forever; writeAtomic replaces a file whole.
import {
  accessSync,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  realpathSync,
  renameSync,
  rmSync,
  statfsSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, isAbsolute, join, relative, sep } from 'node:path';

/** Below this many free bytes a disk counts as full (a record is a few KB, a log far more). */
const FULL_BELOW = 1 << 20;

/** The nearest path at or above `dir` that exists (a dangling symlink counts: it blocks the way). */
function nearestExisting(dir: string): string {
  for (let d = dir; ; d = dirname(d)) {
    try {
      lstatSync(d);
      return d;
    } catch {
      if (dirname(d) === d) return d;
    }
  }
}

/**
 * Whether `path` (absolute; it need not exist yet) is `folder` or inside it, with the links on
 * the way resolved: a link that leads out of the folder leads out. A path through a dangling
 * link cannot be told, and counts as outside.
 */
export function isInside(folder: string, path: string): boolean {
  const real = (p: string) => {
    const at = nearestExisting(p);
    return join(realpathSync(at), relative(at, p));
  };
  let rel: string;
  try {
    rel = relative(real(folder), real(path));
  } catch {
    return false;
  }
  return rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}

/**
 * The first symbolic link on the way from `root` (not itself checked) down to `path`, or
 * undefined: what a write or delete there would follow out of the place it seems to be in.
 */
export function linkOnTheWay(root: string, path: string): string | undefined {
  const rel = relative(root, path);
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return undefined;
  let at = root;
  for (const part of rel.split(sep)) {
    at = join(at, part);
    const stat = lstatSync(at, { throwIfNoEntry: false });
    if (!stat) return undefined;
    if (stat.isSymbolicLink()) return at;
  }
  return undefined;
}

/** Why files cannot be written in `dir` (or created on the way to it), or undefined. */
export function unwritableBecause(dir: string): string | undefined {
  const at = nearestExisting(dir);
  try {
    if (!statSync(at).isDirectory()) return `${at} is not a folder`;
    accessSync(at, constants.W_OK);
  } catch (error) {
    return `${at} cannot be written (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
  }
  try {
    const fs = statfsSync(at);
    const free = Number(fs.bavail) * Number(fs.bsize);
    if (free < FULL_BELOW) return `the disk holding ${at} is full (${free} bytes free)`;
  } catch {
    // no statfs here: only a write would tell
  }
  return undefined;
}

/**
 * What polyspawn keeps (the run store, agent.md, sessions, its code cache) is the user's alone:
 * prompts, answers and logs, and an agent.md may hold an MCP server's token. New folders get
 * PRIVATE_DIR, new files PRIVATE_FILE, whatever the umask; a file meant to be read (IAC.md, a
 * client's config) is written elsewhere, with the umask's mode.
 */
export const PRIVATE_DIR = 0o700;
export const PRIVATE_FILE = 0o600;

/**
 * `mkdir -p` that always ends. Node's own (`mkdirSync(dir, { recursive: true })`, sync or not)
 * loops forever, a core at 100%, when a folder on the way exists but cannot hold children and
 * says ENOENT: a dangling symlink, a stale mount, a path under /proc. Here each folder is tried
 * once more after its parent exists, and a second ENOENT is the answer.
 */
export function makeDirs(dir: string, mode = PRIVATE_DIR): void {
  if (statSync(dir, { throwIfNoEntry: false })?.isDirectory()) return; // the usual case, without an exception
  try {
    mkdirSync(dir, mode);
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && statSync(dir).isDirectory()) return; // statSync throws for a dangling link
    if (code !== 'ENOENT' || dirname(dir) === dir) throw error;
  }
  makeDirs(dirname(dir), mode);
  try {
    mkdirSync(dir, mode);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/**
 * Temp file + rename: a reader sees the old file or the new one, never part of one; the file is
 * PRIVATE_FILE. No fsync: a
 * crash may lose the newest change, not the file. Synchronous, so the pid names the temp file
 * (write-file-atomic's realpath, stat, chown, chmod and exit hooks cost more than the write; this
 * is on every job's path).
 */
export function writeAtomic(path: string, data: string | Buffer): void {
  const tmp = tempNameBeside(path, 'tmp');
  try {
    writeNoLink(tmp, data); // the temp name is predictable, and a run folder is its agent's to write
    renameSync(tmp, path);
  } catch (error) {
    rmSync(tmp, { force: true });
    throw error;
  }
}

/** The name of a temp file written beside `path` before it is renamed over it (`writeAtomic`, IAC.md's writer). */
export const tempNameBeside = (path: string, suffix: string | number) => `${path}.${process.pid}.${suffix}`;

/** Whether `candidate` is a temp file some process wrote beside `path` (tempNameBeside's names). */
export const isTempBeside = (path: string, candidate: string) =>
  candidate.startsWith(`${path}.`) && /^\d+\.(?:\d+|tmp)$/.test(candidate.slice(path.length + 1));

/** Up to `length` bytes at `position` of an open file (fewer at its end). */
export function readAt(fd: number, position: number, length: number): Buffer {
  const buffer = Buffer.allocUnsafe(Math.max(0, length));
  let got = 0;
  while (got < buffer.length) {
    const n = readSync(fd, buffer, got, buffer.length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return buffer.subarray(0, got);
}

/**
 * Writes a file 0600, made anew: never through what an agent may have left at its name in a run
 * folder it can write (a link there to a file of the user's would be written through).
 */
export function writeNoLink(path: string, data: string | Buffer): void {
  rmSync(path, { force: true });
  writeFileSync(path, data, { mode: PRIVATE_FILE, flag: 'wx' });
}

/**
 * A file of a run folder is opened without following a link and without waiting: an agent writes
 * its run folder, and a FIFO there would block the server at open, a link would have it read another file.
 */
const OPEN_REGULAR = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Opens a regular file to read (OPEN_REGULAR): a link, a FIFO, a device or a folder throws, as
 * a missing file does (ENOENT).
 */
export function openRegularFile(path: string): number {
  const fd = openSync(path, OPEN_REGULAR);
  if (fstatSync(fd).isFile()) return fd;
  closeSync(fd);
  throw Object.assign(new Error(`${path} is not a regular file`), { code: 'ENOTREG' });
}

/**
 * Calls `read` with the file open and its size, then closes it; a file that cannot be opened, a
 * link, or anything but a regular file (a FIFO, a device: see openRegularFile) gives `absent`.
 */
export function withFile<T>(path: string, absent: T, read: (fd: number, size: number) => T): T {
  let fd: number;
  try {
    fd = openRegularFile(path);
  } catch {
    return absent;
  }
  try {
    return read(fd, fstatSync(fd).size);
  } finally {
    closeSync(fd);
  }
}

/**
 * A small file's text, read as withFile opens it: undefined when there is none, or why it
 * cannot be read (a link, a FIFO, a folder, larger than `maxBytes`).
 */
export function readRegularFile(path: string, maxBytes: number): string | { problem: string } | undefined {
  let fd: number;
  try {
    fd = openRegularFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    return {
      problem:
        code === 'ELOOP' ? 'a symbolic link' : code === 'ENOTREG' ? 'not a regular file' : `unreadable (${code})`,
    };
  }
  try {
    const size = fstatSync(fd).size;
    if (size > maxBytes) return { problem: `${size} bytes, over ${maxBytes}` };
    return readAt(fd, 0, size).toString('utf8');
  } finally {
    closeSync(fd);
  }
}
