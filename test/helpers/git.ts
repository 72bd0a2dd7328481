// git as a user runs it in a test's project (with an identity of their own), and a repository
// with one commit to start from.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

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
