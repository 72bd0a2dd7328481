// makeDirs: mkdir -p that always ends, where Node's recursive mkdir spins forever (a folder on
// the way that exists but says ENOENT for a child: a dangling symlink, /proc).
import { mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { makeDirs, unwritableBecause } from '../../src/lib/fs.js';

const dir = mkdtempSync(join(tmpdir(), 'polyspawn-make-dirs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('makeDirs', () => {
  test('makes every folder on the way, and is content with one that exists', () => {
    const deep = join(dir, 'a', 'b', 'c');
    makeDirs(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    makeDirs(deep);
    makeDirs(join(dir, 'a'));
  });

  test('a file in the way is an error', () => {
    writeFileSync(join(dir, 'file'), '');
    expect(() => makeDirs(join(dir, 'file'))).toThrow(/EEXIST/);
    expect(() => makeDirs(join(dir, 'file', 'below'))).toThrow(/ENOTDIR/);
  });

  test('a dangling symlink on the way is ENOENT at once, not a loop', () => {
    symlinkSync(join(dir, 'gone'), join(dir, 'dangling'));
    expect(() => makeDirs(join(dir, 'dangling', 'store', 'runs'))).toThrow(/ENOENT/);
    expect(() => makeDirs(join(dir, 'dangling'))).toThrow(/ENOENT/);
    expect(unwritableBecause(join(dir, 'dangling', 'store'))).toMatch(/dangling cannot be written \(ENOENT\)/);
  });

  test.skipIf(process.platform !== 'linux')('a path under /proc is ENOENT at once, not a loop', () => {
    expect(() => makeDirs('/proc/polyspawn-nope/state')).toThrow(/ENOENT/);
  });
});
