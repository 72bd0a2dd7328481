// An isolated agent's branch as the dashboard's review reads it (src/jobs/worktree/diff.ts), from
// real git output: file names exactly as stored whatever they hold (git quotes them in its
// headers), renames, binary files, a missing final newline, line numbers, and the size cut.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initRepo, userGit as sh } from '../helpers/git.js';
import { parseBranchDiff } from '../../src/jobs/worktree/diff.js';

let dir: string;
let names: string;
let patch: string;
const DIFF = ['diff', '--no-ext-diff', '--no-textconv', '--no-color', '-M', '-O/dev/null', 'main', 'agent', '--'];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'polyspawn-branch-diff-'));
  initRepo(dir);
  writeFileSync(join(dir, 'app.txt'), 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n');
  writeFileSync(join(dir, 'moved.txt'), 'a file long enough that git sees it moved\nand a second line\n');
  sh(dir, 'add', '.');
  sh(dir, 'commit', '-q', '-m', 'base');
  sh(dir, 'switch', '-q', '-c', 'agent');
  writeFileSync(join(dir, 'app.txt'), 'one\ntwo\nTHREE\nfour\nfive\nsix\nseven\nno newline');
  sh(dir, 'mv', 'moved.txt', 'renamed.txt');
  mkdirSync(join(dir, 'we ird'));
  writeFileSync(join(dir, 'we ird', 'tab\tand "quotes" <img src=x>.txt'), '<script>alert(1)</script>\n');
  writeFileSync(join(dir, 'ünï.txt'), 'x\n');
  writeFileSync(join(dir, 'blob.bin'), Buffer.from([0, 1, 2, 3, 0, 255]));
  sh(dir, 'add', '-A');
  sh(dir, 'commit', '-q', '-m', 'agent');
  names = sh(dir, ...DIFF.slice(0, 1), '--name-status', '-z', ...DIFF.slice(1));
  patch = sh(dir, ...DIFF);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('every file with its exact name, status and counts; hunks with line numbers; binary and a missing newline said', () => {
  const files = parseBranchDiff(names, patch, 1_000_000);
  const byPath = new Map(files.map((f) => [f.path, f]));
  expect([...byPath.keys()].sort()).toEqual(
    ['app.txt', 'blob.bin', 'renamed.txt', 'we ird/tab\tand "quotes" <img src=x>.txt', 'ünï.txt'].sort(),
  );
  expect(byPath.get('renamed.txt')).toMatchObject({ status: 'renamed', from: 'moved.txt', added: 0, removed: 0 });
  expect(byPath.get('blob.bin')).toMatchObject({ status: 'added', binary: true, hunks: [] });
  expect(byPath.get('we ird/tab\tand "quotes" <img src=x>.txt')).toMatchObject({
    status: 'added',
    added: 1,
    hunks: [{ lines: [{ kind: 'add', text: '<script>alert(1)</script>', newLine: 1 }] }],
  });
  const app = byPath.get('app.txt')!;
  expect(app).toMatchObject({ status: 'modified', added: 2, removed: 1, cut: false });
  const lines = app.hunks.flatMap((h) => h.lines);
  expect(lines).toContainEqual({ kind: 'remove', text: 'three', oldLine: 3 });
  expect(lines).toContainEqual({ kind: 'add', text: 'THREE', newLine: 3 });
  expect(lines).toContainEqual({ kind: 'context', text: 'four', oldLine: 4, newLine: 4 });
  expect(lines).toContainEqual({ kind: 'add', text: 'no newline', newLine: 8 });
  expect(lines.at(-1)).toEqual({ kind: 'note', text: '\\ No newline at end of file' });
  // Nothing past the last line: the patch's own final newline is no blank line.
  expect(lines.filter((l) => l.kind === 'context' && l.text === '')).toEqual([]);
});

test('past the size, lines are left out and the files that lost some say so; every file is still listed', () => {
  const files = parseBranchDiff(names, patch, 40);
  expect(files).toHaveLength(5);
  expect(files.some((f) => f.cut)).toBe(true);
  const shown = files.flatMap((f) => f.hunks.flatMap((h) => h.lines)).reduce((n, l) => n + l.text.length + 1, 0);
  expect(shown).toBeLessThanOrEqual(40);
  expect(parseBranchDiff('', '', 40)).toEqual([]);
});
