import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/processes.js';
import { followLines, readHeadAndTail, readNewest } from '../../src/jobs/process/log-reader.js';
import { readLogPage } from '../../src/jobs/process/log-page.js';

const NL = 0x0a;
const dir = mkdtempSync(join(tmpdir(), 'polyspawn-log-reader-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
/** A log file holding `data`. */
function log(data: string | Buffer): string {
  const path = join(dir, `${files++}.log`);
  writeFileSync(path, data);
  return path;
}

/** What readHeadAndTail must return, computed from the whole text in memory. */
function expected(data: Buffer, headBytes: number, tailBytes: number): { text: string; truncated: boolean } {
  if (data.length <= headBytes + tailBytes) return { text: data.toString('utf8'), truncated: false };
  const head = data.subarray(0, headBytes);
  const cut = data.length - tailBytes;
  const tail = data.subarray(cut);
  const headEnd = head.lastIndexOf(NL) + 1;
  const tailStart = data[cut - 1] === NL ? 0 : tail.indexOf(NL) + 1; // a tail that begins a line keeps it
  return {
    text: head.subarray(0, headEnd).toString('utf8') + tail.subarray(tailStart).toString('utf8'),
    truncated: true,
  };
}

function numberedLines(count: number, width = 0): string {
  let s = '';
  for (let i = 0; i < count; i++) s += `line ${i} ${'x'.repeat(width ? (i * 7) % width : 0)}\n`;
  return s;
}

describe('readHeadAndTail', () => {
  it('returns everything untouched when it fits', () => {
    expect(readHeadAndTail(log('{"a":1}\n{"b":2}\n'), 10, 20)).toEqual({
      text: '{"a":1}\n{"b":2}\n',
      truncated: false,
    });
    expect(readHeadAndTail(log('0123456789abcdefghij'), 8, 12)).toEqual({
      text: '0123456789abcdefghij',
      truncated: false,
    });
  });

  it('an empty or missing log is empty', () => {
    expect(readHeadAndTail(log(''), 4, 4)).toEqual({ text: '', truncated: false });
    expect(readHeadAndTail(join(dir, 'never-written.log'), 4, 4)).toEqual({ text: '', truncated: false });
  });

  it('drops the middle at line boundaries: whole lines from the start and from the end', () => {
    const input = numberedLines(1000);
    const { text, truncated } = readHeadAndTail(log(input), 100, 200);
    expect(truncated).toBe(true);
    const all = input.split('\n');
    const lines = text.split('\n');
    expect(lines.at(-1)).toBe('');
    for (const line of lines.slice(0, -1)) expect(all).toContain(line);
    expect(lines[0]).toBe('line 0 ');
    expect(lines.at(-2)).toBe('line 999 ');
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(300);
  });

  it('keeps the first tail line whole when the cut falls exactly on a line boundary', () => {
    // 'aaaa\n' is dropped; the tail is exactly 'bbbb\ncccc\n'.
    expect(readHeadAndTail(log('HHHH\naaaa\nbbbb\ncccc\n'), 5, 10)).toEqual({
      text: 'HHHH\nbbbb\ncccc\n',
      truncated: true,
    });
  });

  it('a head only (as for nothing), a tail only (as for stderr)', () => {
    expect(readHeadAndTail(log('first\nsecond\nthird\nfourth\n'), 12, 0)).toEqual({ text: 'first\n', truncated: true });
    expect(readHeadAndTail(log('one\ntwo\nthree\nfour\n'), 0, 10)).toEqual({ text: 'four\n', truncated: true });
  });

  it('matches the in-memory rule for every split, including a last line without a newline', () => {
    const input = Buffer.from(numberedLines(400, 50) + 'final line without newline');
    const path = log(input);
    for (const [head, tail] of [
      [100, 300],
      [0, 300],
      [100, 0],
      [1000, 1],
      [input.length, 0],
      [input.length - 10, 9],
      [input.length - 10, 11],
      [6, 6],
    ] as const) {
      expect(readHeadAndTail(path, head, tail), `head ${head} tail ${tail}`).toEqual(expected(input, head, tail));
    }
  });

  it('does not split multi-byte characters at line-boundary cuts', () => {
    const { text, truncated } = readHeadAndTail(log('héllo wörld\n'.repeat(50) + '日本語 🎉 final\n'), 30, 60);
    expect(truncated).toBe(true);
    expect(text).not.toContain('\uFFFD');
    expect(text.startsWith('héllo wörld\n')).toBe(true);
    expect(text.endsWith('日本語 🎉 final\n')).toBe(true);
  });

  it('reads only head + tail of a large log', () => {
    const chunk = numberedLines(500);
    const { text, truncated } = readHeadAndTail(log(chunk.repeat(2000)), 1024, 4096);
    expect(truncated).toBe(true);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(1024 + 4096);
    expect(text.startsWith('line 0 \n')).toBe(true);
    expect(text.endsWith('line 499 \n')).toBe(true);
  });
});

describe('readNewest', () => {
  it('returns the last characters, or all of a short log', () => {
    const path = log('abcdefghijklmnop');
    expect(readNewest(path, 5)).toBe('lmnop');
    expect(readNewest(path, 0)).toBe('');
    expect(readNewest(path, 100)).toBe('abcdefghijklmnop');
    expect(readNewest(join(dir, 'never-written.log'), 10)).toBe('');
  });

  it('drops a character cut in half at the start rather than show a replacement char', () => {
    expect(readNewest(log('aé'), 2)).toBe('é');
    expect(readNewest(log('aé'), 1)).toBe(''); // only the second byte of é fits
    expect(readNewest(log('x🎉'), 3)).toBe('');
    expect(readNewest(log('x🎉'), 4)).toBe('🎉');
  });
});

describe('followLines', () => {
  it('hands over each complete line once, as the file grows; a line still being written waits for its end', async () => {
    const path = log('');
    const lines: string[] = [];
    const watch = followLines(path, (line) => lines.push(line), 10);
    appendFileSync(path, 'one\ntw');
    await waitFor('the first line', () => lines.length === 1);
    appendFileSync(path, 'o\nthree ünï\n');
    await waitFor('the next two lines', () => lines.length === 3);
    await watch.stop();
    expect(lines).toEqual(['one', 'two', 'three ünï']);
  });

  it('skips a line over 1 MiB whole, and goes on with the next', async () => {
    const path = log(`first\n${'x'.repeat(3 << 20)}\nafter\n`);
    const lines: string[] = [];
    await followLines(path, (line) => lines.push(line), 1 << 30).stop();
    expect(lines).toEqual(['first', 'after']);
  });

  it('a file not there yet is nothing, not an error', async () => {
    const lines: string[] = [];
    await followLines(join(dir, 'missing.log'), (line) => lines.push(line), 1 << 30).stop();
    expect(lines).toEqual([]);
  });

  it('a log that grew by 64 MiB between two looks is read over several turns of the event loop, all of it by stop()', async () => {
    const total = 640 * 1024;
    const path = log(`${'x'.repeat(99)}\n`.repeat(total));
    let lines = 0;
    const watch = followLines(path, () => lines++, 1);
    await waitFor('the first lines', () => lines > 0);
    // The server got a turn after the first look: it had not read all of it in one go.
    expect(lines).toBeLessThan(total);
    await watch.stop();
    expect(lines).toBe(total);
  });
});

describe('a log the agent replaced (it writes its run folder)', () => {
  // A FIFO would block the server at open (nobody writes it); a link would have it read another
  // file (a key the agent's sandbox hides from it). Each reads as an absent log, at once.
  const secretFile = log('PRIVATE KEY of the user\n');
  const fifo = join(dir, 'fifo.log');
  execFileSync('mkfifo', [fifo]);
  const link = join(dir, 'link.log');
  symlinkSync(secretFile, link);

  it.each([
    ['a FIFO', fifo],
    ['a link to another file', link],
    ['a device', '/dev/zero'],
    ['a folder', dir],
  ])('%s reads as an absent log, without waiting', (_what, path) => {
    expect(readHeadAndTail(path, 100, 100)).toEqual({ text: '', truncated: false });
    expect(readNewest(path, 100)).toBe('');
    expect(readLogPage(path, { offset: 0 })).toMatchObject({ size: 0, text: '', eof: true });
  });
});
