// git as a user runs it in a test's project (with an identity of their own), a repository with
// one commit to start from, and the request of an agent isolated in a worktree of it.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JobRequest } from '../../src/jobs/table.js';

/** Runs git in `dir` and returns its output. */
export const userGit = (dir: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=User', '-c', 'user.email=user@example.com', ...args], {
    cwd: dir,
    encoding: 'utf8',
  });

/** Makes `dir` a repository on branch main with one commit (a README). */
export function initRepo(dir: string): void {
  userGit(dir, 'init', '-q', '-b', 'main');
  writeFileSync(join(dir, 'README.md'), 'a project\n');
  userGit(dir, 'add', '.');
  userGit(dir, 'commit', '-q', '-m', 'first');
}

/** A job request for an isolated CLI agent in `project` (the job table's input, as the tools make it). */
export const isolatedRequest = (project: string, prompt: string, more: Partial<JobRequest> = {}): JobRequest => ({
  backend: 'codex',
  model: 'm',
  prompt,
  cwd: project,
  timeoutS: 60,
  extra: {},
  isolation: 'worktree',
  ...more,
});
