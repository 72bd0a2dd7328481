// `polyspawn init`'s last step: keep the run store (.polyspawn/: logs, records, the shared
// server's token) out of `git status`, by one line appended to the project's .gitignore. The
// user's file is never rewritten: read as a regular file (never through a link), then one line
// appended through a descriptor that refuses a link, or left alone with a sentence that says why.
import { closeSync, constants, existsSync, fstatSync, openSync, writeSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { isInside, readRegularFile } from '../lib/fs.js';

/** A .gitignore larger than this is not one init reads: it says so and leaves it. */
const MAX_GITIGNORE_BYTES = 1024 * 1024;

/** The git work tree `dir` is in: the nearest folder at or above it holding `.git` (a folder, or a worktree's file). */
function gitTop(dir: string): string | undefined {
  for (let at = dir; ; at = dirname(at)) {
    if (existsSync(join(at, '.git'))) return at;
    if (dirname(at) === at) return undefined;
  }
}

/** The lines that already ignore `name` (the store's folder, relative to the .gitignore's folder). */
function ignores(lines: string[], name: string): boolean {
  const wanted = new Set([name, `${name}/`, `/${name}`, `/${name}/`, `${name}/*`, `/${name}/*`, `${name}/**`]);
  return lines.some((line) => wanted.has(line.trim()));
}

/**
 * One sentence about the store and git: appended `/<store>/` to `<dir>/.gitignore`, already
 * ignored, not a git repository, or why the file was left as it is.
 */
export function ignoreStateDir(dir: string, stateDir: string): string {
  if (!gitTop(dir)) return `${dir} is not in a git repository: no .gitignore written`;
  if (!isInside(dir, stateDir) || stateDir === dir)
    return `the run store ${stateDir} is outside the project's folder: no .gitignore written`;
  const name = relative(dir, stateDir).split(sep).join('/');
  const entry = `/${name}/`;
  const file = join(dir, '.gitignore');
  const text = readRegularFile(file, MAX_GITIGNORE_BYTES);
  const byHand = `add the line ${entry} to it yourself`;
  if (typeof text === 'object') return `.gitignore is ${text.problem}: left as it is; ${byHand}`;
  if (text !== undefined && ignores(text.split(/\r?\n/), name)) return `.gitignore already ignores ${entry}`;
  const eol = text?.includes('\r\n') ? '\r\n' : '\n';
  const line = `${text && !text.endsWith('\n') ? eol : ''}${entry}${eol}`;
  let fd: number;
  try {
    // A link put there since the read is refused, not written through; a FIFO does not block.
    fd = openSync(
      file,
      constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      0o666,
    );
  } catch (error) {
    return `.gitignore could not be opened (${(error as NodeJS.ErrnoException).code}): ${byHand}`;
  }
  try {
    if (!fstatSync(fd).isFile()) return `.gitignore is not a regular file: left as it is; ${byHand}`;
    writeSync(fd, line);
  } catch (error) {
    return `.gitignore could not be written (${(error as NodeJS.ErrnoException).code}): ${byHand}`;
  } finally {
    closeSync(fd);
  }
  return `.gitignore: ${text === undefined ? 'created with' : 'added'} ${entry} (the run store: logs, records, tokens)`;
}
