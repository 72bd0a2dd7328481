// A terminal command's streams in memory (src/commands/io.ts): the tests read what it printed.
import { PassThrough } from 'node:stream';
import type { CommandIo } from '../../src/commands/io.js';

/** An io for a command run in `cwd` with `env`; `printed()` is what it wrote to stdout and stderr so far. */
export function memoryIo(
  env: NodeJS.ProcessEnv,
  cwd: string,
): { io: CommandIo; printed: () => { stdout: string; stderr: string } } {
  let stdout = '';
  let stderr = '';
  const io: CommandIo = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    stdin: new PassThrough(),
    env,
    cwd,
  };
  return { io, printed: () => ({ stdout, stderr }) };
}
