// Secrets in the files a run leaves behind. The CLI writes its own output (stdout.log,
// stderr.log, artifacts such as copilot's usage file) while it runs, verbatim; once the run
// has ended, every file of its folder that holds a secret is rewritten without it (temp
// file + rename), before the job's final state is recorded (src/jobs/recorder.ts, the executor
// guard, which also redacts the outcome and the live output tail). A log page read back is
// masked here too (`redactPage`).
import {
  closeSync,
  createWriteStream,
  fstatSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  type Dirent,
} from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { join } from 'node:path';
import { REDACTED, type Redactor } from './redact.js';
import { openRegularFile, PRIVATE_FILE, writeAtomic } from './fs.js';
import { PROMPT_FILE, RECORD_FILE } from './run-folder.js';

const CHUNK = 1 << 20;
/** A secret is never longer than this, so a window this far back holds any that is cut. */
export const OVERLAP = 1024;
/** Written redacted by the store itself. */
const STORE_FILES = new Set([RECORD_FILE, PROMPT_FILE]);

/** Scrubs every file under `dir` (but the store's own) that holds a secret. */
export async function scrubDir(dir: string, redactor: Redactor): Promise<string[]> {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const changed: string[] = [];
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) changed.push(...(await scrubDir(path, redactor)));
    else if (entry.isFile() && !STORE_FILES.has(entry.name) && !entry.name.includes('.scrub-')) {
      if (await scrubFile(path, redactor)) changed.push(path);
    }
  }
  return changed;
}

/**
 * A file of at most one chunk, scrubbed at once: most runs' logs are a few hundred bytes, and
 * every run's folder is scrubbed when it ends (a burst of 200 runs ends 200 at once).
 * Undefined when the file is larger (scrubbed in chunks, without blocking the server).
 */
function scrubSmallFile(path: string, redactor: Redactor): boolean | undefined {
  const fd = openRegularFile(path); // (not a FIFO an agent put there meanwhile: that would block the server)
  let data: Buffer;
  try {
    if (fstatSync(fd).size > CHUNK) return undefined;
    data = readFileSync(fd);
  } finally {
    closeSync(fd);
  }
  const latin1 = data.toString('latin1');
  const spans = redactor.byteSpans(latin1);
  if (spans.length === 0) return false;
  const parts: Buffer[] = [];
  let at = 0;
  for (const [start, end] of spans) {
    parts.push(data.subarray(at, start), Buffer.from(REDACTED));
    at = end;
  }
  parts.push(data.subarray(at));
  writeAtomic(path, Buffer.concat(parts));
  return true;
}

/** Reads a file in chunks that overlap by OVERLAP bytes; stops when `visit` returns true. */
async function* chunks(path: string): AsyncGenerator<{ buffer: Buffer; eof: boolean }> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    let position = 0;
    for (;;) {
      const want = Math.min(CHUNK, Math.max(0, size - position));
      const buffer = Buffer.allocUnsafe(want);
      const { bytesRead } = want > 0 ? await file.read(buffer, 0, want, position) : { bytesRead: 0 };
      position += bytesRead;
      const eof = bytesRead < want || position >= size;
      yield { buffer: buffer.subarray(0, bytesRead), eof };
      if (eof) return;
    }
  } finally {
    await file.close();
  }
}

/** Whether the file holds a secret; if so, rewrites it with each one replaced by [REDACTED]. */
export async function scrubFile(path: string, redactor: Redactor): Promise<boolean> {
  const small = scrubSmallFile(path, redactor);
  if (small !== undefined) return small;
  let found = false;
  let carry = Buffer.alloc(0);
  for await (const { buffer } of chunks(path)) {
    const window = Buffer.concat([carry, buffer]);
    if (redactor.byteSpans(window.toString('latin1')).length > 0) {
      found = true;
      break;
    }
    carry = window.subarray(Math.max(0, window.length - OVERLAP));
  }
  if (!found) return false;

  const tmp = `${path}.scrub-${process.pid}`;
  // Made afresh, never through a link an agent left at this predictable name in its run folder.
  rmSync(tmp, { force: true });
  const out = createWriteStream(tmp, { fd: openSync(tmp, 'wx', PRIVATE_FILE) });
  const write = async (data: Buffer | string) => {
    if (!out.write(data)) await once(out, 'drain');
  };
  try {
    carry = Buffer.alloc(0);
    for await (const { buffer, eof } of chunks(path)) {
      const window = Buffer.concat([carry, buffer]);
      const latin1 = window.toString('latin1');
      const spans = redactor.byteSpans(latin1);
      // Keep the last OVERLAP bytes for the next round, unless a secret starts there.
      let cut = eof ? window.length : Math.max(0, window.length - OVERLAP);
      for (const [start, end] of spans) if (start < cut && end > cut) cut = start;
      let at = 0;
      for (const [start, end] of spans) {
        if (start >= cut) break;
        await write(window.subarray(at, start));
        await write(REDACTED);
        at = end;
      }
      await write(window.subarray(at, cut));
      carry = window.subarray(cut);
    }
    await write(carry);
    out.end();
    await once(out, 'close');
    await rename(tmp, path);
  } catch (error) {
    out.destroy();
    await rm(tmp, { force: true });
    throw error;
  }
  return true;
}

/**
 * A page of a log file with secrets masked, including one that the page's edges cut: spans are
 * found in a window OVERLAP bytes wider on each side, and whatever part of a span falls inside
 * the page becomes [REDACTED].
 */
export function redactPage(page: Buffer, before: Buffer, after: Buffer, redactor: Redactor): string {
  const window = Buffer.concat([before, page, after]).toString('latin1');
  const from = before.length;
  const to = from + page.length;
  const parts: string[] = [];
  let at = from;
  for (const [start, end] of redactor.byteSpans(window)) {
    if (end <= from || start >= to) continue;
    const s = Math.max(start, from);
    if (s > at) parts.push(Buffer.from(window.slice(at, s), 'latin1').toString('utf8'));
    parts.push(REDACTED);
    at = Math.min(end, to);
  }
  if (at < to) parts.push(Buffer.from(window.slice(at, to), 'latin1').toString('utf8'));
  return parts.join('');
}
