import { describe, expect, it } from 'vitest';
import { HeadTailBuffer } from '../../src/head-tail-buffer.js';

const NL = 0x0a;

function fill(buf: HeadTailBuffer, data: Buffer, chunkSizes: number[]): void {
  let at = 0;
  let i = 0;
  while (at < data.length) {
    const size = Math.max(1, chunkSizes[i++ % chunkSizes.length]!);
    buf.push(data.subarray(at, at + size));
    at += size;
  }
}

/** What text() must return, computed from the whole stream at once. */
function expected(data: Buffer, headBytes: number, tailBytes: number): { text: string; truncated: boolean } {
  if (data.length <= headBytes + tailBytes) return { text: data.toString('utf8'), truncated: false };
  const head = data.subarray(0, headBytes);
  const cut = data.length - tailBytes;
  const tail = data.subarray(cut);
  const headEnd = head.lastIndexOf(NL) + 1;
  let tailStart: number;
  if (data[cut - 1] === NL) tailStart = 0; // the tail begins on a line of its own: keep that line
  else {
    const nl = tail.indexOf(NL);
    tailStart = nl < 0 ? 0 : nl + 1;
  }
  return { text: head.subarray(0, headEnd).toString('utf8') + tail.subarray(tailStart).toString('utf8'), truncated: true };
}

function numberedLines(count: number, width = 0): string {
  let s = '';
  for (let i = 0; i < count; i++) s += `line ${i} ${'x'.repeat(width ? (i * 7) % width : 0)}\n`;
  return s;
}

describe('HeadTailBuffer', () => {
  it('returns everything untouched when nothing was dropped', () => {
    const b = new HeadTailBuffer(10, 20);
    b.push(Buffer.from('{"a":1}\n{"b":'));
    b.push(Buffer.from('2}\n'));
    expect(b.text()).toEqual({ text: '{"a":1}\n{"b":2}\n', truncated: false });
  });

  it('keeps exactly head + tail bytes without calling it truncated', () => {
    const data = Buffer.from('0123456789abcdefghij'); // 20 bytes, no newline
    const b = new HeadTailBuffer(8, 12);
    fill(b, data, [3]);
    expect(b.text()).toEqual({ text: data.toString(), truncated: false });
  });

  it('an empty buffer is empty', () => {
    const b = new HeadTailBuffer(4, 4);
    expect(b.text()).toEqual({ text: '', truncated: false });
    expect(b.newest(10)).toBe('');
  });

  it('drops the middle at line boundaries: whole lines from the start and from the end', () => {
    const input = numberedLines(1000);
    const b = new HeadTailBuffer(100, 200);
    fill(b, Buffer.from(input), [37]);
    const { text, truncated } = b.text();
    expect(truncated).toBe(true);
    const all = input.split('\n');
    const lines = text.split('\n');
    expect(lines.at(-1)).toBe(''); // ends with a newline
    for (const line of lines.slice(0, -1)) expect(all).toContain(line);
    expect(lines[0]).toBe('line 0 ');
    expect(lines.at(-2)).toBe('line 999 ');
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(300);
    expect(text).toBe(expected(Buffer.from(input), 100, 200).text);
  });

  it('keeps the first tail line whole when the cut falls exactly on a line boundary', () => {
    // 'aaaa\n' is dropped; the tail is exactly 'bbbb\ncccc\n'.
    const b = new HeadTailBuffer(5, 10);
    b.push(Buffer.from('HHHH\naaaa\nbbbb\ncccc\n'));
    expect(b.text()).toEqual({ text: 'HHHH\nbbbb\ncccc\n', truncated: true });

    const c = new HeadTailBuffer(5, 10);
    fill(c, Buffer.from('HHHH\naaaa\nbbbb\ncccc\n'), [1]);
    expect(c.text()).toEqual({ text: 'HHHH\nbbbb\ncccc\n', truncated: true });
  });

  it('holds a head only (tail size 0)', () => {
    const b = new HeadTailBuffer(12, 0);
    b.push(Buffer.from('first\nsecond\nthird\n'));
    b.push(Buffer.from('fourth\n'));
    expect(b.text()).toEqual({ text: 'first\n', truncated: true });
  });

  it('holds output that fits in the head alone', () => {
    const b = new HeadTailBuffer(64, 64);
    b.push(Buffer.from('short\n'));
    expect(b.text()).toEqual({ text: 'short\n', truncated: false });
    expect(b.newest(3)).toBe('rt\n');
  });

  it('holds a tail only (head size 0), as for stderr', () => {
    const b = new HeadTailBuffer(0, 10);
    fill(b, Buffer.from('one\ntwo\nthree\nfour\n'), [2]);
    expect(b.text()).toEqual({ text: 'four\n', truncated: true });
  });

  it('gives the same result for any chunking, including chunks that straddle head and tail', () => {
    const input = Buffer.from(numberedLines(400, 50) + 'final line without newline');
    const sizes = [[1], [7], [99], [100], [101], [250, 3], [input.length], [5000, 1, 13]];
    for (const [head, tail] of [
      [100, 300],
      [0, 300],
      [100, 0],
      [1000, 1],
      [input.length, 0],
      [input.length - 10, 9],
    ] as const) {
      const want = expected(input, head, tail);
      for (const chunking of sizes) {
        const b = new HeadTailBuffer(head, tail);
        fill(b, input, chunking);
        expect(b.text(), `head ${head} tail ${tail} chunks ${chunking}`).toEqual(want);
      }
    }
  });

  it('a single chunk larger than head + tail is split and cut correctly', () => {
    const b = new HeadTailBuffer(6, 6);
    b.push(Buffer.from('ab\ncd\nef\ngh\nij\nkl\n'));
    expect(b.text()).toEqual({ text: 'ab\ncd\nij\nkl\n', truncated: true });
  });

  it('does not split multi-byte characters at line-boundary cuts', () => {
    const input = Buffer.from('héllo wörld\n'.repeat(50) + '日本語 🎉 final\n');
    const b = new HeadTailBuffer(30, 60);
    fill(b, input, [5]);
    const { text, truncated } = b.text();
    expect(truncated).toBe(true);
    expect(text).not.toContain('\uFFFD');
    expect(text.startsWith('héllo wörld\n')).toBe(true);
    expect(text.endsWith('日本語 🎉 final\n')).toBe(true);
  });

  it('keeps memory bounded while megabytes go through', () => {
    const b = new HeadTailBuffer(1024, 4096);
    const chunk = Buffer.from(numberedLines(500));
    for (let i = 0; i < 2000; i++) b.push(chunk);
    const { text, truncated } = b.text();
    expect(truncated).toBe(true);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(1024 + 4096);
    expect(text.endsWith('line 499 \n')).toBe(true);
  });

  describe('newest()', () => {
    it('returns the last characters', () => {
      const b = new HeadTailBuffer(4, 8);
      b.push(Buffer.from('abcdefghijklmnop'));
      expect(b.newest(5)).toBe('lmnop');
      expect(b.newest(0)).toBe('');
    });

    it('spans head and tail while nothing was dropped', () => {
      const b = new HeadTailBuffer(4, 8);
      b.push(Buffer.from('abc'));
      b.push(Buffer.from('defg'));
      expect(b.newest(6)).toBe('bcdefg');
      expect(b.newest(100)).toBe('abcdefg');
    });

    it('follows the stream after drops', () => {
      const b = new HeadTailBuffer(4, 8);
      for (let i = 0; i < 100; i++) b.push(Buffer.from(`${i},`));
      expect(b.newest(6)).toBe('98,99,');
    });

    it('drops a character cut in half at the start rather than show a replacement char', () => {
      const b = new HeadTailBuffer(0, 64);
      b.push(Buffer.from('aé')); // é is 2 bytes
      expect(b.newest(2)).toBe('é');
      expect(b.newest(1)).toBe(''); // only the second byte of é fits
      const c = new HeadTailBuffer(0, 64);
      c.push(Buffer.from('x🎉')); // 4 bytes
      expect(c.newest(3)).toBe('');
      expect(c.newest(4)).toBe('🎉');
    });
  });
});
