// The run store's index on disk, and how it is compacted while other servers append to it and
// follow it. Two files (docs/ARCHITECTURE.md, "The index and its compaction"):
//
//   index.jsonl       the live file: every server appends its lines here (O_APPEND, no lock).
//                     Once compacted, its first line is a header naming its generation and
//                     how much of the base belongs to it:
//                     {"gen":G,"base":B,"done":N,"seg":S,"prev":[[G-1,R],...]}.
//   index.base.jsonl  the base: the final line of every finished run, one per run, in the order
//                     they finished; only bytes [0, B) count. Only a compaction writes it, and
//                     only past B: what a reader reads there never changes.
//
// A compaction (under the store lock, one at a time) reads the live file, appends its finished
// runs to the base, writes a new live file (the next header, then the newest line of every run
// still queued or running) and renames it over index.jsonl. Two races, and what closes them:
//
// - An append in flight into the old file. Every appender checks, after its write, that
//   index.jsonl is still the file it wrote to (same inode); if not, and the compaction that
//   replaced it had not read that far (the new header's `prev` says how far it read each file it
//   replaced), it appends the line again to the new one. A line written before the rename but
//   after the compaction read the old file is copied over by the compaction itself, from the old
//   file's descriptor, after the rename. A line can so arrive twice in the live file (harmless:
//   the same line again) or after a newer line of the same run (a copy made after its server's
//   next write): readers and compactions never let a line move a run back (queued < running <
//   finished; `rank`).
// - A reader holding an offset into the old file. The new file may be as long as the old one,
//   or longer: a reader notices the replacement by the generation in the header (and the inode),
//   never by the size alone, and then reads again: the base's newest lines, then the live file.
//
// A finished line can still reach the live file after the compaction read it (its appender saw
// the replacement before the file grew past it): the next compaction skips the runs the previous
// one appended (the base from S on), so the base holds each run once.
import { closeSync, constants, fdatasyncSync, fstatSync, ftruncateSync, openSync, statSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isFinished, type JobState } from '../src/jobs/table.js';
import { PRIVATE_FILE, readAt, withFile, writeAtomic } from '../src/lib/fs.js';
import { DamagedLines, readIndexLine } from './index-line.js';

export const LIVE_FILE = 'index.jsonl';
export const BASE_FILE = 'index.base.jsonl';

/** The first line of a compacted index.jsonl. A file without one (never compacted) is generation 0. */
export type IndexHeader = {
  /** Generation: one more at each compaction. */
  gen: number;
  /** Bytes of the base that belong to this generation. */
  base: number;
  /** Finished runs in those bytes. */
  done: number;
  /** Where in the base the previous compaction's runs begin. */
  seg: number;
  /** [generation, bytes read] of the live files the last compactions replaced, newest first. */
  prev: [number, number][];
};

const NO_HEADER: IndexHeader = { gen: 0, base: 0, done: 0, seg: 0, prev: [] };
/** The generation of a live file whose header is damaged: never a real one's (readers read it all again). */
const DAMAGED_GENERATION = -1;
const APPEND_FLAGS =
  constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;
/** How much of a file is read at once. */
const READ_CHUNK = 1 << 20;
/** How many replaced files a header remembers: an appender stalled across more appends again. */
const PREV_KEPT = 16;
const HEADER_START = '{"gen":';
/** How much of the live file's start is read for its header (a damaged one can be long). */
const HEADER_MAX = 64 * 1024;

/** How far a line moves a run: a run never goes back from running to queued, nor from finished. */
export const rank = (state: JobState): number => (isFinished(state) ? 2 : state === 'running' ? 1 : 0);

/** A line's run and state, and the line itself (without a torn line glued before it), or undefined for what is not a run's line. */
type LineKey = (raw: string) => { id: string; st: JobState; raw: string } | undefined;

/**
 * The header of the open live file and its length in bytes (0: none). A first line that is
 * neither a header nor a run's line, while the base has lines, is a damaged header (`damaged`):
 * the base is then taken whole (its complete lines), so that no reader and no compaction loses
 * the history it holds (a compaction truncates the base to the header's length).
 */
export function readHeader(fd: number, dir: string): { header: IndexHeader; bytes: number; damaged?: true } {
  const buffer = readAt(fd, 0, HEADER_MAX);
  const end = buffer.indexOf(10);
  if (end < 0) return { header: NO_HEADER, bytes: 0 };
  const first = buffer.toString('utf8', 0, end);
  if (first.startsWith(HEADER_START)) {
    try {
      const h = JSON.parse(first) as IndexHeader;
      if ([h.gen, h.base, h.done, h.seg].every(Number.isSafeInteger) && Array.isArray(h.prev))
        return { header: h, bytes: end + 1 };
    } catch {
      // damaged: below
    }
  } else if (readIndexLine(first).line) return { header: NO_HEADER, bytes: 0 };
  const base = wholeLines(join(dir, BASE_FILE));
  if (!base.bytes) return { header: NO_HEADER, bytes: 0 };
  return {
    header: { gen: DAMAGED_GENERATION, base: base.bytes, done: base.lines, seg: 0, prev: [] },
    bytes: end + 1,
    damaged: true,
  };
}

/** The length of a file's complete lines in bytes, and how many there are. */
function wholeLines(path: string): { bytes: number; lines: number } {
  return withFile(path, { bytes: 0, lines: 0 }, (fd, size) => {
    let bytes = 0;
    let lines = 0;
    for (let position = 0; position < size; position += READ_CHUNK) {
      const chunk = readAt(fd, position, Math.min(READ_CHUNK, size - position));
      for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) {
        lines++;
        bytes = position + i + 1;
      }
    }
    return { bytes, lines };
  });
}

/**
 * Calls `each` with every complete line in bytes [start, end) of an open file, read a chunk at a
 * time (a file of any size, a line of any length): a line longer than a chunk is passed as
 * undefined, unread. Returns where the complete lines end (a line still being written is read next time).
 */
export function eachLine(fd: number, start: number, end: number, each: (raw: string | undefined) => void): number {
  let position = start;
  let skipping = false;
  while (position < end) {
    const length = Math.min(READ_CHUNK, end - position);
    const chunk = readAt(fd, position, length);
    let from = 0;
    for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, from)) {
      each(skipping ? undefined : chunk.toString('utf8', from, nl));
      skipping = false;
      from = nl + 1;
    }
    if (from > 0) position += from;
    else if (length === READ_CHUNK) {
      skipping = true; // no newline in a whole chunk: a line too long to be ours
      position += length;
    } else break;
  }
  return position;
}

/**
 * Every damaged line of the index's two files, each read whole (for `doctor`): the live file
 * (its header is line 1) and the base up to the header's length.
 */
export function indexDamage(dir: string): { live: DamagedLines; base: DamagedLines } {
  const live = new DamagedLines();
  const base = new DamagedLines();
  const scan = (fd: number, start: number, end: number, into: DamagedLines, first: number) => {
    let n = first;
    eachLine(fd, start, end, (raw) => {
      n++;
      if (raw === undefined || readIndexLine(raw).damaged) into.add(n);
    });
  };
  const baseBytes = withFile(join(dir, LIVE_FILE), 0, (fd, size) => {
    const { header, bytes, damaged } = readHeader(fd, dir);
    if (damaged) live.add(1);
    scan(fd, bytes, size, live, bytes ? 1 : 0);
    return header.base;
  });
  withFile(join(dir, BASE_FILE), undefined, (fd) => scan(fd, 0, baseBytes, base, 0));
  return { live, base };
}

/**
 * Appends whole lines to index.jsonl: one write(2), O_APPEND, so never interleaved with another
 * server's; again if a compaction replaced the file meanwhile and had not read them (see above).
 */
export function appendToIndex(path: string, lines: string): void {
  for (;;) {
    // Never through a link nor into a FIFO (a cloned repository's .polyspawn/ could hold either).
    const fd = openSync(path, APPEND_FLAGS, PRIVATE_FILE);
    try {
      if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file: move it away`);
      const bytes = Buffer.from(lines);
      // A short write (the disk full) leaves a torn line, which readers skip as damaged: the save fails, and says so.
      const count = writeSync(fd, bytes);
      if (count < bytes.length)
        throw new Error(`${path}: ${count} of ${bytes.length} bytes written (is the disk full?)`);
      const written = fstatSync(fd);
      let now;
      try {
        now = statSync(path);
      } catch {
        continue; // removed meanwhile: written again, to a new file
      }
      if (now.ino === written.ino && now.dev === written.dev) return;
      // Replaced. The lines end at or before the file's size now: if the compaction that
      // replaced it read that far, or copied them over, they are in the new files already
      // (appended again, a finished run could reach the base twice).
      if (carriedOver(path, readHeader(fd, dirname(path)).header.gen, written.size, lines)) return;
    } finally {
      closeSync(fd);
    }
  }
}

/** Whether `lines`, written to generation `gen` before it was `size` bytes long, are in the files that replaced it. */
function carriedOver(path: string, gen: number, size: number, lines: string): boolean {
  return withFile(path, false, (fd, now) => {
    const { header, bytes } = readHeader(fd, dirname(path));
    const read = header.prev.find(([g]) => g === gen)?.[1];
    if (read !== undefined && size <= read) return true;
    // (Rare: a write that raced a compaction. The live file is small, the base read from S.)
    if (readAt(fd, bytes, now - bytes).indexOf(Buffer.from(lines)) >= 0) return true;
    return readLines(join(dirname(path), BASE_FILE), header.base, Infinity, header.seg).some((l) => `${l}\n` === lines);
  });
}

/**
 * The lines in bytes [start, end) of a file of whole lines, or only the last `count` of them,
 * read from the end: loading a 100,000-run base for its newest 1,000 reads 1,000 lines.
 */
export function readLines(path: string, end: number, count = Infinity, start = 0): string[] {
  return withFile(path, [], (fd) => {
    const chunks: Buffer[] = [];
    let position = end;
    let newlines = 0;
    // (At most 64 KiB a line wanted: a base of one endless damaged line is not read whole.)
    while (position > start && newlines <= count && end - position < count * (1 << 16)) {
      const length = Math.min(1 << 16, position - start);
      position -= length;
      const chunk = readAt(fd, position, length);
      chunks.unshift(chunk);
      for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) newlines++;
    }
    const lines = Buffer.concat(chunks).toString('utf8').split('\n');
    lines.pop(); // after the last newline: nothing
    if (position > start) lines.shift(); // the part of a line before the first chunk
    return lines.length > count ? lines.slice(lines.length - count) : lines;
  });
}

/**
 * Compacts the index (see above). Call it under the store lock: two compactions at once would
 * write the same bytes of the base. Returns the live file's size before and after.
 */
export function compactIndex(dir: string, keyOf: LineKey): { before: number; after: number } | undefined {
  const livePath = join(dir, LIVE_FILE);
  const basePath = join(dir, BASE_FILE);
  return withFile(livePath, undefined, (old, before) => {
    const { header, bytes } = readHeader(old, dir);
    // The newest line of each run, in the order of those lines (a finished run's is its final one).
    // A damaged line is left behind: only what a reader can read goes on.
    const newest = new Map<string, { st: JobState; raw: string }>();
    const read = eachLine(old, bytes, before, (raw) => {
      const key = raw === undefined ? undefined : keyOf(raw);
      if (!key) return;
      const held = newest.get(key.id);
      if (held && rank(held.st) > rank(key.st)) return;
      newest.delete(key.id);
      newest.set(key.id, { st: key.st, raw: key.raw });
    });
    const inBase = new Set(readLines(basePath, header.base, Infinity, header.seg).map((raw) => keyOf(raw)?.id));
    const finished: string[] = [];
    const active: string[] = [];
    for (const [id, { st, raw }] of newest) {
      if (!isFinished(st)) active.push(`${raw}\n`);
      else if (!inBase.has(id)) finished.push(`${raw}\n`);
    }
    const added = Buffer.from(finished.join(''));
    if (added.length) {
      // Past this generation's bytes: what a crashed compaction left there goes.
      const fd = openSync(basePath, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, PRIVATE_FILE);
      try {
        ftruncateSync(fd, header.base);
        if (added.length) writeSync(fd, added, 0, added.length, header.base);
        fdatasyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
    const next: IndexHeader = {
      gen: header.gen + 1,
      base: header.base + added.length,
      done: header.done + finished.length,
      seg: header.base,
      prev: [[header.gen, read] as [number, number], ...header.prev].slice(0, PREV_KEPT),
    };
    const text = `${JSON.stringify(next)}\n${active.join('')}`;
    writeAtomic(livePath, text);
    // What was appended to the old file since it was read, after the new one's lines: its
    // servers' later lines may precede it there (see `rank`).
    const tail = readAt(old, read, fstatSync(old).size - read);
    const tailEnd = tail.lastIndexOf(10) + 1;
    if (tailEnd > 0) appendToIndex(livePath, tail.toString('utf8', 0, tailEnd));
    return { before, after: Buffer.byteLength(text) + tailEnd };
  });
}
