// Reads a CLI's output back from its log file, which the child writes itself (src/jobs/process/runner.ts):
// a child that prints a gigabyte costs the server a few megabytes, read once it has ended.
// Parsers need the head (codex's thread id, the first events) and the tail (the final
// result); the log file keeps the rest.
import { readAt, withFile } from '../../lib/fs.js';

const NEWLINE = 0x0a;

/**
 * The whole text when the file holds at most `headBytes + tailBytes`; otherwise its first
 * `headBytes` and last `tailBytes`, each cut to whole lines (a tail that begins a line keeps it).
 */
export function readHeadAndTail(
  path: string,
  headBytes: number,
  tailBytes: number,
): { text: string; truncated: boolean } {
  return withFile(path, { text: '', truncated: false }, (fd, size) => {
    if (size <= headBytes + tailBytes) return { text: readAt(fd, 0, size).toString('utf8'), truncated: false };
    const head = readAt(fd, 0, headBytes);
    // One byte more than the tail: whether the byte before it ends a line.
    const withBefore = readAt(fd, size - tailBytes - 1, tailBytes + 1);
    const tail = withBefore.subarray(1);
    const tailStart = withBefore[0] === NEWLINE ? 0 : tail.indexOf(NEWLINE) + 1;
    return {
      text:
        head.subarray(0, head.lastIndexOf(NEWLINE) + 1).toString('utf8') + tail.subarray(tailStart).toString('utf8'),
      truncated: true,
    };
  });
}

/** The file's last `maxBytes` as text, without a character its start cuts in half. */
export function readNewest(path: string, maxBytes: number): string {
  return withFile(path, '', (fd, size) => {
    const take = Math.min(size, Math.max(0, maxBytes));
    return readAt(fd, size - take, take)
      .toString('utf8')
      .replace(/^\uFFFD+/, '');
  });
}

/** A line longer than this is skipped whole by followLines: no JSON event a budget reads is that long. */
const MAX_FOLLOWED_LINE = 1 << 20;

/**
 * Calls `onLine` with each complete line a growing file gains, reading every `intervalMs` from
 * where the last read ended, so a run's output can be watched while its child writes it.
 * stop() reads what is left once more and ends the watch.
 */
export function followLines(path: string, onLine: (line: string) => void, intervalMs: number): { stop(): void } {
  let offset = 0;
  let pending = Buffer.alloc(0);
  let skipping = false;
  const readNew = () =>
    withFile(path, undefined, (fd, size) => {
      while (offset < size) {
        const chunk = readAt(fd, offset, Math.min(size - offset, 1 << 20));
        if (chunk.length === 0) break;
        offset += chunk.length;
        let data = Buffer.concat([pending, chunk]);
        for (let end = data.indexOf(NEWLINE); end >= 0; end = data.indexOf(NEWLINE)) {
          if (!skipping) onLine(data.subarray(0, end).toString('utf8'));
          skipping = false;
          data = data.subarray(end + 1);
        }
        if (data.length > MAX_FOLLOWED_LINE) {
          skipping = true;
          data = Buffer.alloc(0);
        }
        pending = Buffer.from(data);
      }
    });
  const timer = setInterval(readNew, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      readNew();
    },
  };
}
