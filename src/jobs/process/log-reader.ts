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

/** What one look reads at most: a log that grew by a gigabyte is read over many turns of the event loop. */
const FOLLOW_BYTES_PER_TURN = 4 << 20;

/**
 * Calls `onLine` with each complete line a growing file gains, reading every `intervalMs` from
 * where the last read ended, so a run's output can be watched while its child writes it. A look
 * reads at most FOLLOW_BYTES_PER_TURN, and the next one follows at once while more is there.
 * stop() ends the watch once what is left has been read.
 */
export function followLines(
  path: string,
  onLine: (line: string) => void,
  intervalMs: number,
): { stop(): Promise<void> } {
  let offset = 0;
  let pending = Buffer.alloc(0);
  let skipping = false;
  /** Reads on; true once it has reached the end of the file as it is now. */
  const readSome = () =>
    withFile(path, true, (fd, size) => {
      const until = Math.min(size, offset + FOLLOW_BYTES_PER_TURN);
      while (offset < until) {
        const chunk = readAt(fd, offset, Math.min(until - offset, 1 << 20));
        if (chunk.length === 0) return true;
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
      return offset >= size;
    });
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const look = () => {
    const caughtUp = readSome();
    if (!stopped) timer = setTimeout(look, caughtUp ? intervalMs : 0);
  };
  timer = setTimeout(look, intervalMs);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      while (!readSome()) await new Promise((resolve) => setImmediate(resolve));
    },
  };
}
