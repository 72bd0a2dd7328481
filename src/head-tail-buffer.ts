// Keeps the first `headBytes` and the last `tailBytes` of a byte stream, so a child that
// prints a gigabyte costs the server a few megabytes. Parsers need the head (codex's
// thread id, the first events) and the tail (the final result); the log file has the rest.
export class HeadTailBuffer {
  private readonly head: Buffer[] = [];
  private headSize = 0;
  private tail: Buffer[] = [];
  private tailSize = 0;
  private dropped = false;
  /** Whether the last byte dropped from the tail's front was a newline (the tail then starts a line). */
  private newlineBeforeTail = false;

  constructor(
    private readonly headBytes: number,
    private readonly tailBytes: number,
  ) {}

  push(chunk: Buffer): void {
    if (this.headSize < this.headBytes) {
      const take = chunk.subarray(0, this.headBytes - this.headSize);
      this.head.push(take);
      this.headSize += take.length;
      chunk = chunk.subarray(take.length);
      if (chunk.length === 0) return;
    }
    this.tail.push(chunk);
    this.tailSize += chunk.length;
    while (this.tail.length > 0 && this.tailSize - this.tail[0]!.length >= this.tailBytes) {
      const gone = this.tail.shift()!;
      this.tailSize -= gone.length;
      if (gone.length > 0) {
        this.newlineBeforeTail = gone[gone.length - 1] === 0x0a;
        this.dropped = true;
      }
    }
  }

  /** The whole text when nothing was dropped; otherwise head and tail cut at line boundaries. */
  text(): { text: string; truncated: boolean } {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    let newlineBeforeTail = this.newlineBeforeTail;
    if (tail.length > this.tailBytes) {
      newlineBeforeTail = tail[tail.length - this.tailBytes - 1] === 0x0a;
      tail = tail.subarray(tail.length - this.tailBytes);
      this.dropped = true;
    }
    if (!this.dropped) return { text: Buffer.concat([head, tail]).toString('utf8'), truncated: false };
    const headEnd = head.lastIndexOf(0x0a) + 1;
    // Drop the partial line at the tail's start, but not a whole line that starts it.
    const tailStart = newlineBeforeTail ? 0 : tail.indexOf(0x0a) + 1;
    return {
      text: head.subarray(0, headEnd).toString('utf8') + tail.subarray(tailStart).toString('utf8'),
      truncated: true,
    };
  }

  /** The last `maxChars` characters (roughly: the cut is made on bytes). */
  newest(maxChars: number): string {
    const parts: Buffer[] = [];
    let size = 0;
    for (let i = this.tail.length - 1; i >= 0 && size < maxChars; i--) {
      parts.unshift(this.tail[i]!);
      size += this.tail[i]!.length;
    }
    if (size < maxChars) parts.unshift(...this.head);
    const all = Buffer.concat(parts);
    return all.subarray(Math.max(0, all.length - maxChars)).toString('utf8').replace(/^\uFFFD+/, '');
  }
}
