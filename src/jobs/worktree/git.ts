// git as polyspawn runs it: the `git` executable through execFile (no shell: paths with spaces
// are one argument), never the user's hooks, never a prompt, never a signing key. Pure parsers
// of git's -z output beside it, testable alone.
//
// An agent writes in the project or in its worktree, so whatever git would read from there is
// hostile: `.git/config` (an agent in the project folder), the `.git` file of its worktree, a
// `.gitattributes` anywhere. git runs here as the server's user, outside every sandbox, so no
// command may execute a program an agent named:
// - where: the git folders and the work tree are given (`--git-dir`, `--work-tree`,
//   GIT_COMMON_DIR), resolved once from the user's checkout (repositoryOf); a worktree's own
//   `.git` file and its `commondir` are never read.
// - the single-valued keys that run something (fsmonitor, hooks, signing, pager, editor, the
//   transports that a lazy fetch would start) are pinned by `-c` and the environment, which come
//   before any config file.
// - the drivers a `.gitattributes` can name (filter.<name>, merge.<name>) cannot be unset by
//   `-c`, and their names are the agent's to choose: before each command, the config git would
//   read is listed (`git config --list --show-scope --show-origin`, which runs nothing), and every
//   driver the repository's own config defines (scope local or worktree, includes followed, or a
//   file inside the repository's folders) is emptied for that command, by GIT_CONFIG_KEY_n (a
//   name may hold an `=`). A driver of the user's own ~/.gitconfig or /etc/gitconfig (git-lfs)
//   stays: no agent can write those (the sandbox hides the home folder), and it is what the
//   user's own git runs. An agent that rewrites `.git/config` between the listing and the
//   command could still win that race: the sandbox keeps `.git` read-only for a sandboxed agent,
//   and an unsandboxed one runs as the user anyway.
// - diff drivers (diff.external, diff.<name>.command, textconv) are never reached: every diff and
//   log is run --no-ext-diff --no-textconv.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { SetupError } from '../../lib/errors.js';
import { isInside } from '../../lib/fs.js';

type GitRun = { code: number; stdout: string; stderr: string };

/**
 * Where a git command runs, every folder of it computed by polyspawn: the git folder (a linked
 * worktree's admin folder, or the repository's own), the repository's common folder, the work tree.
 */
export type GitPlace = { gitDir: string; commonDir: string; workTree: string; quarantine?: Quarantine };

/**
 * Objects a command writes go to `dir` alone, the repository's `objects` folder read beside them
 * as an alternate, and no ref can be updated: git's own receive-pack quarantine, for objects that
 * are checked before they may enter the repository.
 */
type Quarantine = { dir: string; objects: string };

/**
 * Every call: no hook runs (post-checkout on `worktree add`, post-commit, the merge hooks, the
 * reference-transaction hook), no fsmonitor, nothing signed or verified (gpg), no submodule
 * entered (each has a config of its own), no background maintenance, no colour in what is parsed,
 * no transport (a partial clone's lazy fetch would start ssh or a remote helper).
 */
const ALWAYS = [
  '--no-pager',
  ...[
    'core.hooksPath=/dev/null',
    'core.fsmonitor=false',
    'commit.gpgSign=false',
    'tag.gpgSign=false',
    'merge.verifySignatures=false',
    'log.showSignature=false',
    'submodule.recurse=false',
    'diff.ignoreSubmodules=all',
    'status.submoduleSummary=false',
    'merge.stat=false',
    'merge.autoStash=false',
    'gc.auto=0',
    'maintenance.auto=false',
    'color.ui=false',
    'protocol.allow=never',
  ].flatMap((setting) => ['-c', setting]),
];
/** Who polyspawn's own commits are by, so they work where the user set no git identity. */
export const POLYSPAWN_IDENTITY = ['-c', 'user.name=polyspawn', '-c', 'user.email=polyspawn@localhost'];
/** What `git diff` and `git log` take so no diff driver's program runs (diff.external, textconv). */
export const NO_DIFF_PROGRAMS = ['--no-ext-diff', '--no-textconv'];
const MAX_OUTPUT = 64 * 1024 * 1024;

/** The server's variables that describe the user (identity, where their own config is): the rest of GIT_* is dropped. */
const USER_GIT_ENV = new Set([
  'GIT_AUTHOR_NAME',
  'GIT_AUTHOR_EMAIL',
  'GIT_COMMITTER_NAME',
  'GIT_COMMITTER_EMAIL',
  'GIT_CONFIG_GLOBAL',
  'GIT_CONFIG_SYSTEM',
  'GIT_CONFIG_NOSYSTEM',
  'GIT_EXEC_PATH',
]);

/** git's environment: the server's, without a GIT_* that would point git elsewhere, with nothing to prompt or run. */
function gitEnv(place: GitPlace | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!name.startsWith('GIT_') || USER_GIT_ENV.has(name)) env[name] = value;
  return {
    ...env,
    ...(place ? { GIT_COMMON_DIR: place.commonDir } : {}),
    ...(place?.quarantine
      ? {
          GIT_OBJECT_DIRECTORY: place.quarantine.dir,
          GIT_ALTERNATE_OBJECT_DIRECTORIES: place.quarantine.objects,
          GIT_QUARANTINE_PATH: place.quarantine.dir,
        }
      : {}),
    // No transport at all, whatever a config allows (an empty list of protocols).
    GIT_ALLOW_PROTOCOL: '',
    GIT_NO_LAZY_FETCH: '1',
    GIT_TERMINAL_PROMPT: '0',
    // The environment wins over core.editor and core.pager: `true` and `cat` are no agent's.
    GIT_EDITOR: 'true',
    GIT_SEQUENCE_EDITOR: 'true',
    GIT_PAGER: 'cat',
    // refs/replace/* would let whoever writes refs swap the commits polyspawn reads.
    GIT_NO_REPLACE_OBJECTS: '1',
  };
}

/** Runs git in `place`; resolves with its exit code and output (a failing git is not an exception). */
export async function git(place: GitPlace, args: readonly string[]): Promise<GitRun> {
  const pinned = [`--git-dir=${place.gitDir}`, `--work-tree=${place.workTree}`];
  const listed = await run(place.workTree, place, [
    ...pinned,
    'config',
    '--list',
    '--show-scope',
    '--show-origin',
    '-z',
  ]);
  // Fails closed: a config git cannot list is not run with (the command would fail on it too).
  if (listed.code !== 0) return listed;
  const drivers = repositoryDrivers(listed.stdout, (file) => inPlace(place, file));
  return run(place.workTree, place, [...pinned, ...args], neutralized(drivers));
}

/** Runs git in `cwd` to find a repository (repositoryOf): nothing is pinned yet, and nothing there runs a program. */
export const gitDiscover = (cwd: string, args: readonly string[]) => run(cwd, undefined, args);

function run(
  cwd: string,
  place: GitPlace | undefined,
  args: readonly string[],
  settings: readonly (readonly [string, string])[] = [],
): Promise<GitRun> {
  return new Promise((resolve, reject) => {
    const env = { ...gitEnv(place), ...configEnv(settings) };
    execFile(
      'git',
      [...ALWAYS, ...args],
      { cwd, env, maxBuffer: MAX_OUTPUT, encoding: 'utf8' },
      (error, stdout, stderr) => {
        // A number: git's exit code; a string: git did not run (or its output was too large).
        const code = (error as { code?: unknown } | null)?.code;
        if (code === 'ENOENT' && !existsSync(cwd)) {
          reject(new Error(`the folder ${cwd} does not exist`));
        } else if (code === 'ENOENT') {
          reject(new SetupError('git is not installed (or not on PATH): install git to run agents in worktrees'));
        } else if (error && typeof code !== 'number') {
          reject(new Error(`git ${args.find((a) => !a.startsWith('-')) ?? ''} did not finish: ${error.message}`));
        } else resolve({ code: error ? (code as number) : 0, stdout, stderr });
      },
    );
  });
}

/**
 * Settings as GIT_CONFIG_COUNT/KEY_n/VALUE_n: a key apart from its value, so a driver named with
 * an `=` (which `-c name=value` would split there) is still the key it is.
 */
function configEnv(settings: readonly (readonly [string, string])[]): Record<string, string> {
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(settings.length) };
  settings.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** A driver a `.gitattributes` can name that runs a program in a merge, a checkout, an add or a status. */
type Driver = { kind: 'filter' | 'merge'; name: string };

/**
 * The drivers that the repository's own config defines, from `git config --list --show-scope
 * --show-origin -z`: what an agent may have written. A driver counts unless every key of it comes
 * from the system's or the user's config (scope system or global) and from no file `inRepository`
 * says is the repository's (a user-wide config may include a file of the project).
 */
export function repositoryDrivers(listZ: string, inRepository: (file: string) => boolean): Driver[] {
  const found = new Map<string, Driver>();
  const fields = listZ.split('\0');
  for (let i = 0; i + 2 < fields.length; i += 3) {
    const [scope, origin, entry] = [fields[i]!, fields[i + 1]!, fields[i + 2]!];
    const key = entry.split('\n', 1)[0]!;
    const match = /^(filter|merge)\.(.+)\.[^.]+$/s.exec(key);
    if (!match) continue;
    // The user's own: /etc/gitconfig, ~/.gitconfig and what they include from outside the repository.
    const users =
      (scope === 'system' || scope === 'global') && !(origin.startsWith('file:') && inRepository(origin.slice(5)));
    if (!users) found.set(key.slice(0, key.lastIndexOf('.')), { kind: match[1] as Driver['kind'], name: match[2]! });
  }
  return [...found.values()];
}

/** Whether a config file (relative to the work tree, as git names the repository's own) is in one of `place`'s folders. */
function inPlace(place: GitPlace, file: string): boolean {
  const path = resolve(place.workTree, file);
  return [place.workTree, place.gitDir, place.commonDir].some((folder) => isInside(folder, path));
}

/**
 * Settings under which the drivers run nothing: a filter with empty commands is no filter (and
 * not required); a merge driver exits 1, so its files conflict and the merge is aborted. A diff
 * driver's programs are left to NO_DIFF_PROGRAMS (an empty one is an error, not "none").
 */
function neutralized(drivers: readonly Driver[]): [string, string][] {
  return drivers.flatMap(({ kind, name }) =>
    (kind === 'filter' ? FILTER_OFF : MERGE_OFF).map(
      ([key, value]) => [`${kind}.${name}.${key}`, value] as [string, string],
    ),
  );
}

const FILTER_OFF = [
  ['clean', ''],
  ['smudge', ''],
  ['process', ''],
  ['required', 'false'],
] as const;
const MERGE_OFF = [
  ['driver', 'exit 1'],
  ['recursive', 'binary'],
] as const;

/** Runs git and returns its stdout or throws an Error with git's own message. */
export async function gitOk(place: GitPlace, args: readonly string[]): Promise<string> {
  const run = await git(place, args);
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

/** `git status` as parsed here; a submodule is not entered (git would run status inside it, under its own config). */
const STATUS = ['status', '--porcelain=v1', '-z', '--ignore-submodules=all'];

/** The tree's tracked changes (staged or not), untracked files left out. */
export async function trackedChanges(place: GitPlace): Promise<string[]> {
  return statusPaths(await gitOk(place, [...STATUS, '--untracked-files=no']));
}

/**
 * Every change in a tree, untracked files included: each file (`perFile`), or an untracked
 * folder as one entry (the user's checkout: its untracked run store may hold thousands of files).
 */
export async function allChanges(place: GitPlace, perFile = true): Promise<string[]> {
  const untracked = perFile ? '--untracked-files=all' : '--untracked-files=normal';
  return statusPaths(await gitOk(place, [...STATUS, untracked]));
}

/** The commit a ref names, or undefined. */
export async function commitOf(place: GitPlace, ref: string): Promise<string | undefined> {
  const run = await git(place, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
  return run.code === 0 ? run.stdout.trim() : undefined;
}

export const branchExists = async (place: GitPlace, branch: string) =>
  (await git(place, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`])).code === 0;
