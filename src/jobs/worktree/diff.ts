// An isolated job's branch as a reviewer reads it: each file the branch changes from its base with
// its hunks. The paths come from `git diff --name-status -z` (exactly as stored, whatever bytes a
// name holds: git's quoted `diff --git "a/…"` headers are never parsed), the hunks from the
// unified diff, file by file in the order git writes both. Read-only: no lock is taken.
import { InputError } from '../../lib/errors.js';
import type { JobTable } from '../table.js';
import { branchExists, gitOk, NO_DIFF_PROGRAMS, type GitPlace } from './git.js';
import { worktreePlace } from './report.js';
import { repositoryOf, type WorktreeContext } from './worktree.js';

type DiffLine = {
  kind: 'context' | 'add' | 'remove' | 'note';
  text: string;
  /** Its number in the base's file (context, remove) and in the branch's (context, add). */
  oldLine?: number;
  newLine?: number;
};

type Hunk = { header: string; lines: DiffLine[] };

type FileStatus = 'added' | 'deleted' | 'modified' | 'renamed' | 'copied' | 'type changed';

export type FileDiff = {
  path: string;
  /** A renamed or copied file's path in the base. */
  from?: string;
  status: FileStatus;
  binary: boolean;
  added: number;
  removed: number;
  hunks: Hunk[];
  /** Lines left out: the review's size was reached (the whole is in `BranchDiff.command`). */
  cut: boolean;
};

export type BranchDiff = {
  branch: string;
  base: string;
  files: FileDiff[];
  /** Whether some hunks were left out for size. */
  cut: boolean;
  /** The git command that shows the whole diff. */
  command: string;
};

/** What a review shows at most of the diff's lines, in characters: past it, lines are left out. */
const MAX_REVIEW_CHARS = 400_000;

const STATUS: Record<string, FileStatus> = {
  A: 'added',
  D: 'deleted',
  M: 'modified',
  R: 'renamed',
  C: 'copied',
  T: 'type changed',
};

/** The same diff for both reads: renames found, git's own file order (no orderFile of a config). */
const DIFF = ['diff', ...NO_DIFF_PROGRAMS, '--no-color', '-M', '-O/dev/null'];

type ReviewContext = WorktreeContext & { jobs: Pick<JobTable, 'get'> };

/**
 * Job `id`'s branch, to review; an InputError when it ran in no worktree or its branch is gone
 * (integrated, discarded, or it changed nothing).
 */
export async function reviewedBranch(ctx: ReviewContext, id: string) {
  const job = ctx.jobs.get(id);
  if (!job) throw new InputError(`no agent with id "${id}"`);
  if (job.isolation !== 'worktree')
    throw new InputError(`agent ${id} did not run in a worktree: its changes are in your checkout already`);
  if (!job.worktree)
    throw new InputError(`agent ${id} has no worktree yet (it is ${job.state}): look again once it runs`);
  const repo = await repositoryOf(ctx.config.projectDir);
  const { branch } = worktreePlace(ctx.config.stateDir, job.worktreeOf ?? id);
  if (!(await branchExists(repo, branch)))
    throw new InputError(
      `agent ${id}'s branch ${branch} is gone: it was integrated or discarded already, or the agent changed nothing`,
    );
  return { repo, job, branch, base: job.worktree.base };
}

/** The diff of job `id`'s branch from its base (refused as reviewedBranch refuses). */
export async function branchDiff(ctx: ReviewContext, id: string): Promise<BranchDiff> {
  const { repo, branch, base } = await reviewedBranch(ctx, id);
  return readDiff(repo, base, branch);
}

async function readDiff(repo: GitPlace, base: string, branch: string): Promise<BranchDiff> {
  const tip = `refs/heads/${branch}`;
  const [names, patch] = await Promise.all([
    gitOk(repo, [...DIFF, '--name-status', '-z', base, tip, '--']),
    gitOk(repo, [...DIFF, base, tip, '--']),
  ]);
  const files = parseBranchDiff(names, patch, MAX_REVIEW_CHARS);
  return {
    branch,
    base,
    files,
    cut: files.some((f) => f.cut),
    command: `git diff ${base} ${branch}`,
  };
}

/** `git diff --name-status -z` as statuses and paths, in order. */
function nameStatus(z: string): { status: FileStatus; path: string; from?: string }[] {
  const fields = z.split('\0');
  const out: { status: FileStatus; path: string; from?: string }[] = [];
  for (let i = 0; i < fields.length; i++) {
    const code = fields[i]![0];
    if (!code) continue;
    const status = STATUS[code] ?? 'modified';
    if (code === 'R' || code === 'C') {
      out.push({ status, from: fields[i + 1]!, path: fields[i + 2]! });
      i += 2;
    } else out.push({ status, path: fields[++i]! });
  }
  return out;
}

/**
 * Pairs `--name-status -z` with the unified diff's sections (each opens with a `diff --git` line;
 * no line of a hunk can, for git prefixes each with ' ', '+', '-' or '\'), and parses each
 * section's hunks, keeping at most `maxChars` characters of lines in all.
 */
export function parseBranchDiff(nameStatusZ: string, patch: string, maxChars: number): FileDiff[] {
  const sections: string[][] = [];
  // Without the patch's final newline, which would read as one more (blank) line.
  for (const line of patch.replace(/\n$/, '').split('\n')) {
    if (line.startsWith('diff --git ')) sections.push([]);
    else sections.at(-1)?.push(line);
  }
  let budget = maxChars;
  return nameStatus(nameStatusZ).map((entry, i) => {
    const file: FileDiff = { ...entry, binary: false, added: 0, removed: 0, hunks: [], cut: false };
    let hunk: Hunk | undefined;
    let oldLine = 0;
    let newLine = 0;
    for (const line of sections[i] ?? []) {
      const header = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
      if (header) {
        oldLine = Number(header[1]);
        newLine = Number(header[2]);
        hunk = { header: line, lines: [] };
        if (budget > 0) file.hunks.push(hunk);
        else file.cut = true;
        continue;
      }
      if (!hunk) {
        if (line.startsWith('Binary files ')) file.binary = true;
        continue;
      }
      const mark = line[0];
      const text = line.slice(1);
      let next: DiffLine;
      if (mark === '+') {
        file.added++;
        next = { kind: 'add', text, newLine: newLine++ };
      } else if (mark === '-') {
        file.removed++;
        next = { kind: 'remove', text, oldLine: oldLine++ };
      } else if (mark === '\\') next = { kind: 'note', text: line };
      // A blank line is a blank context line where diff.suppressBlankEmpty is set.
      else if (mark === ' ' || line === '') next = { kind: 'context', text, oldLine: oldLine++, newLine: newLine++ };
      else continue;
      budget -= line.length + 1;
      if (budget >= 0) hunk.lines.push(next);
      else file.cut = true;
    }
    return file;
  });
}
