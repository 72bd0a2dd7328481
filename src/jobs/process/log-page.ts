// One page of an agent's output log, for the logs tool, the agent-log resource and the
// dashboard: offsets and sizes in bytes of the file; a page ends at a line end when there is one
// (else at a character boundary), and secrets are redacted, even ones a page edge cuts.
import { readAt, withFile } from '../../lib/fs.js';
import { Redactor } from '../../lib/redact.js';
import { redactPage } from '../../lib/scrub.js';

export const DEFAULT_LOG_BYTES = 64 * 1024;
/** Bytes read on each side of a page to find secrets its edges cut. */
const CONTEXT = 1024;

type LogPage = {
  path: string;
  /** Bytes in the log now (it grows while the agent runs). */
  size: number;
  offset: number;
  next_offset: number;
  /** The page reaches the end of the log as it is now. */
  eof: boolean;
  text: string;
};

/** The length of `buffer` without a multi-byte character its end cuts. */
function wholeChars(buffer: Buffer): number {
  let lead = buffer.length - 1;
  while (lead > 0 && lead > buffer.length - 4 && (buffer[lead]! & 0xc0) === 0x80) lead--;
  const b = buffer[lead] ?? 0;
  const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
  return lead + need > buffer.length ? lead : buffer.length;
}

/** secrets: the app's; without it only the generic key shapes are masked. */
export function readLogPage(
  path: string,
  options: { offset?: number; limit?: number; tail?: number },
  secrets: Redactor = new Redactor(),
): LogPage {
  const none = { path, size: 0, offset: 0, next_offset: 0, eof: true, text: '' };
  return withFile(path, none, (fd, size) => {
    const limit = options.tail ?? options.limit ?? DEFAULT_LOG_BYTES;
    let start = options.tail !== undefined ? Math.max(0, size - options.tail) : Math.min(options.offset ?? 0, size);
    let page = readAt(fd, start, Math.min(size, start + limit) - start);
    if (options.tail !== undefined) {
      // A tail starts at a character boundary, not inside one.
      let skip = 0;
      while (skip < 3 && skip < page.length && (page[skip]! & 0xc0) === 0x80) skip++;
      start += skip;
      page = page.subarray(skip);
    }
    if (start + page.length < size && page.length > 0) {
      const newline = page.lastIndexOf(10);
      const cut = newline >= 0 ? newline + 1 : wholeChars(page);
      if (cut > 0) page = page.subarray(0, cut);
    }
    const end = start + page.length;
    const before = readAt(fd, Math.max(0, start - CONTEXT), start - Math.max(0, start - CONTEXT));
    const after = readAt(fd, end, Math.min(CONTEXT, size - end));
    return {
      path,
      size,
      offset: start,
      next_offset: end,
      eof: end >= size,
      text: redactPage(page, before, after, secrets),
    };
  });
}
