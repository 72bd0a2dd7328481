// What a terminal command gets from the CLI: its streams, environment and working folder.
// Commands never touch process.stdout themselves, so tests hand them in-memory streams and
// the server's own stdout stays JSON-RPC only.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { commandFailure, InputError } from '../lib/errors.js';

export type OutStream = {
  write(chunk: string): unknown;
  /** Set on a terminal. */
  isTTY?: boolean;
  columns?: number;
};

export type CommandIo = {
  stdout: OutStream;
  stderr: OutStream;
  stdin: NodeJS.ReadableStream;
  env: NodeJS.ProcessEnv;
  cwd: string;
};

/** node:util's parseArgs, with its errors turned into InputErrors that say what to do. */
export function parseCommandArgs<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  allowPositionals = true,
) {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (error) {
    throw new InputError((error as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
}

/**
 * Prints how `error` ended the command `name` (src/lib/errors.ts: the sentence, then `usage`
 * when it calls for it) and returns the exit code. An error raised by mistake is thrown on.
 */
export function reportFailure(io: CommandIo, name: string, error: unknown, usage = ''): number {
  const failure = commandFailure(error);
  if (!failure) throw error;
  io.stderr.write(`polyspawn ${name}: ${failure.message}\n${failure.withUsage && usage ? `\n${usage}` : ''}`);
  return failure.exitCode;
}

/** Pads columns to their widest cell; the last column is never padded. */
export function textTable(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => [...(r[i] ?? '')].length)));
  const line = (r: string[]) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell + ' '.repeat(widths[i]! - [...cell].length)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** One line, at most `max` characters, for a table cell. */
export function cell(text: string, max: number): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}
