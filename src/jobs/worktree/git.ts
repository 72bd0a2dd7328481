// git as polyspawn runs it: the `git` executable through execFile (no shell: paths with spaces
// are one argument), never the user's hooks, never a prompt, never a signing key. Pure parsers
// of git's -z output beside it, testable alone.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { SetupError } from '../../lib/errors.js';

export type GitRun = { code: number; stdout: string; stderr: string };

/**
 * Every call: no hook of the user's runs (post-checkout on `worktree add`, post-commit, the merge
 * hooks), no commit is signed (a signing agent could prompt), no pager.
 */
const ALWAYS = ['-c', 'core.hooksPath=/dev/null', '-c', 'commit.gpgSign=false', '-c', 'tag.gpgSign=false'];
/** Who polyspawn's own commits are by, so they work where the user set no git identity. */
export const POLYSPAWN_IDENTITY = ['-c', 'user.name=polyspawn', '-c', 'user.email=polyspawn@localhost'];
const MAX_OUTPUT = 64 * 1024 * 1024;

/** Runs git in `cwd`; resolves with its exit code and output (a failing git is not an exception). */
export function git(cwd: string, args: readonly string[]): Promise<GitRun> {
  return new Promise((resolve, reject) => {
    execFile('git', [...ALWAYS, ...args], { cwd, maxBuffer: MAX_OUTPUT, encoding: 'utf8' }, (error, stdout, stderr) => {
      // A number: git's exit code; a string: git did not run (or its output was too large).
      const code = (error as { code?: unknown } | null)?.code;
      if (code === 'ENOENT' && !existsSync(cwd)) {
        reject(new Error(`the folder ${cwd} does not exist`));
      } else if (code === 'ENOENT') {
        reject(new SetupError('git is not installed (or not on PATH): install git to run agents in worktrees'));
      } else if (error && typeof code !== 'number') {
        reject(new Error(`git ${args[0]} did not finish: ${error.message}`));
      } else resolve({ code: error ? (code as number) : 0, stdout, stderr });
    });
  });
}

/** Runs git and returns its stdout, or throws an Error with git's own message. */
export async function gitOk(cwd: string, args: readonly string[]): Promise<string> {
  const run = await git(cwd, args);
  if (run.code !== 0) throw new Error(`git ${args[0]} failed: ${firstLines(run.stderr || run.stdout)}`);
  return run.stdout;
}

/** git's message, kept short for an error. */
export const firstLines = (text: string, lines = 3) => text.trim().split('\n').slice(0, lines).join(' ');

/** The paths of `git status --porcelain=v1 -z` (a rename counts its new and old path). */
export function statusPaths(porcelainZ: string): string[] {
  const fields = porcelainZ.split('\0');
  const paths: string[] = [];
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i]!;
    if (field.length < 4) continue;
    paths.push(field.slice(3));
    // A rename or copy is followed by its source path, a field of its own.
    if (field[0] === 'R' || field[0] === 'C') paths.push(fields[++i]!);
  }
  return paths;
}

/** `git diff --name-only -z` as a list. */
export const nameList = (z: string) => z.split('\0').filter(Boolean);

/** The tree's tracked changes (staged or not), untracked files left out. */
export async function trackedChanges(dir: string): Promise<string[]> {
  return statusPaths(await gitOk(dir, ['status', '--porcelain=v1', '-z', '--untracked-files=no']));
}

/**
 * Every change in a tree, untracked files included: each file (`perFile`), or an untracked
 * folder as one entry (the user's checkout: its untracked run store may hold thousands of files).
 */
export async function allChanges(dir: string, perFile = true): Promise<string[]> {
  const untracked = perFile ? '--untracked-files=all' : '--untracked-files=normal';
  return statusPaths(await gitOk(dir, ['status', '--porcelain=v1', '-z', untracked]));
}

/** The commit a ref names, or undefined. */
export async function commitOf(dir: string, ref: string): Promise<string | undefined> {
  const run = await git(dir, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
  return run.code === 0 ? run.stdout.trim() : undefined;
}

export const branchExists = async (dir: string, branch: string) =>
  (await git(dir, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`])).code === 0;
