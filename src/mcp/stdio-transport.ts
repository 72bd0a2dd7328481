// MCP on this process's stdin and stdout, for `serve` and its relay to the daemon.
import { parseJSONRPCMessage, type JSONRPCMessage, type RequestId, type Transport } from '@modelcontextprotocol/server';

/**
 * The longest message line read from stdin, in bytes. Every input a tool accepts fits it once
 * JSON-escaped (a control character is six bytes: \u0001): a spawn's prompt (2,000,000
 * characters, 12 MB at worst) and system prompt (200,000, 1.2 MB) with room to spare. A longer
 * line is skipped and answered with an error; the server keeps serving.
 */
export const MAX_MESSAGE_BYTES = 32 * 1024 * 1024;

/** JSON-RPC error codes (the specification's). */
const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
/** Where the id of an oversized line is looked for: at its start, as the first key or after "jsonrpc" and "method". */
const ID_AT_START =
  /^\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]{0,200}"\s*,)*\s*"id"\s*:\s*(-?\d{1,15}|"[^"\\]{0,200}")\s*[,}]/;
const ID_PREFIX_BYTES = 1024;

/**
 * MCP over stdio, read with polyspawn's own line reader (not the SDK's: one line over its 10 MiB
 * buffer closed the transport for good, and stdin's end then went unnoticed).
 *
 * - A line past MAX_MESSAGE_BYTES is dropped as it streams in (never held whole) and answered
 *   with an error (its id, when it starts with one); a line that is not JSON, or not JSON-RPC,
 *   too. Then the next line is read as usual.
 * - stdin's end or error, or an error writing stdout (the client is gone: EPIPE), closes the
 *   transport: `onclose` runs once, whatever the reason, and the server shuts down on it.
 * - Every message that finds stdout full waits for the same 'drain' (one listener per message
 *   piles up listeners, and Node warns of a leak past ten), and the messages of one turn of the
 *   event loop go out in one write: a burst's 200 answers cost one system call, not 200.
 */
export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly stdin = process.stdin;
  private readonly stdout = process.stdout;
  /** The current line's bytes so far; undefined while an oversized line is being skipped. */
  private pending: Buffer[] | undefined = [];
  private pendingBytes = 0;
  /** The first bytes of the oversized line being skipped, for its id. */
  private skippedStart = '';
  private drained: Promise<void> | undefined;
  private corked = false;
  private closed = false;

  /**
   * whenClosed: called once when the transport closes, whatever the reason, besides `onclose`
   * (which whoever serves on the transport sets for itself: the SDK's serveStdio does).
   */
  constructor(private readonly whenClosed?: () => void) {}

  async start(): Promise<void> {
    this.stdin.on('data', this.onData);
    this.stdin.on('end', this.onGone);
    this.stdin.on('close', this.onGone);
    this.stdin.on('error', this.onStreamError);
    this.stdout.on('error', this.onStreamError);
    // A process that exits within the turn of its last messages still sends them (stdout to a pipe or file is synchronous).
    process.once('exit', this.uncork);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stdin.off('data', this.onData);
    this.stdin.pause();
    this.pending = [];
    this.onclose?.();
    this.whenClosed?.();
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed || this.stdout.destroyed) return Promise.resolve();
    if (!this.corked) {
      this.corked = true;
      this.stdout.cork();
      setImmediate(this.uncork);
    }
    if (this.stdout.write(`${JSON.stringify(message)}\n`)) return Promise.resolve();
    this.drained ??= new Promise((resolve) =>
      this.stdout.once('drain', () => {
        this.drained = undefined;
        resolve();
      }),
    );
    return this.drained;
  }

  private onData = (chunk: Buffer) => {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl >= 0 && !this.closed; nl = chunk.indexOf(10, start)) {
      this.take(chunk.subarray(start, nl));
      this.endLine();
      start = nl + 1;
    }
    if (start < chunk.length && !this.closed) this.take(chunk.subarray(start));
  };

  /** Adds bytes to the current line, or starts skipping it once it is past the limit. */
  private take(bytes: Buffer): void {
    if (!bytes.length) return;
    if (this.pending === undefined) return;
    this.pendingBytes += bytes.length;
    this.pending.push(bytes);
    if (this.pendingBytes <= MAX_MESSAGE_BYTES) return;
    // Only the start is kept (for the id): not a copy of 32 MiB to read its first kilobyte.
    this.skippedStart = Buffer.concat(this.pending, Math.min(this.pendingBytes, ID_PREFIX_BYTES)).toString('utf8');
    this.pending = undefined;
  }

  private endLine(): void {
    const parts = this.pending;
    const bytes = this.pendingBytes;
    this.pending = [];
    this.pendingBytes = 0;
    if (parts === undefined) {
      const id = ID_AT_START.exec(this.skippedStart)?.[1];
      this.answerError(
        id === undefined ? null : (JSON.parse(id) as RequestId),
        INVALID_REQUEST,
        `message too long: ${bytes} bytes, over the limit of ${MAX_MESSAGE_BYTES} bytes a line; put long material in a file and point the agent at it`,
      );
      return;
    }
    const line = Buffer.concat(parts).toString('utf8').replace(/\r$/, '');
    if (line.trim() === '') return;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (error) {
      this.answerError(null, PARSE_ERROR, `parse error: ${(error as Error).message}`);
      return;
    }
    let message: JSONRPCMessage;
    try {
      message = parseJSONRPCMessage(json);
    } catch {
      const id = (json as { id?: unknown } | null)?.id;
      const known = typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));
      this.answerError(
        known ? (id as RequestId) : null,
        INVALID_REQUEST,
        'invalid request: not a JSON-RPC 2.0 message',
      );
      return;
    }
    this.onmessage?.(message);
  }

  private answerError(id: RequestId | null, code: number, message: string): void {
    this.onerror?.(new Error(message));
    // (The SDK's message type has no id null: the specification's answer to a request whose id is unknown.)
    void this.send({ jsonrpc: '2.0', id, error: { code, message } } as unknown as JSONRPCMessage);
  }

  private onGone = () => void this.close();

  private onStreamError = (error: Error) => {
    this.onerror?.(error);
    void this.close();
  };

  private uncork = () => {
    this.corked = false;
    this.stdout.uncork();
  };
}
