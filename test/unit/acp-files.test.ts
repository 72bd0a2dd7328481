import { mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { readTextFile, writeTextFile } from '../../src/jobs/acp/files.js';
import { tempDir } from '../helpers/temp.js';

test('a link in the job folder leads no read or write outside it; inside, a new file in a new folder is written', () => {
  const root = tempDir('acp-files');
  const folder = join(root, 'job');
  const outside = join(root, 'outside');
  mkdirSync(folder);
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret.txt'), 'secret');
  symlinkSync(join(outside, 'secret.txt'), join(folder, 'file-link'));
  symlinkSync(outside, join(folder, 'dir-link'));
  expect(() => readTextFile(folder, { sessionId: 's', path: join(folder, 'file-link') })).toThrow(
    /outside the job's folder/,
  );
  expect(() => writeTextFile(folder, { sessionId: 's', path: join(folder, 'file-link'), content: 'x' })).toThrow(
    /outside/,
  );
  expect(() =>
    writeTextFile(folder, { sessionId: 's', path: join(folder, 'dir-link', 'new', 'a.txt'), content: 'x' }),
  ).toThrow(/outside/);
  expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('secret');
  expect(existsSync(join(outside, 'new'))).toBe(false);
  writeTextFile(folder, { sessionId: 's', path: join(folder, 'sub', 'b.txt'), content: 'ok' });
  expect(readTextFile(folder, { sessionId: 's', path: join(folder, 'sub', 'b.txt') }).content).toBe('ok');
  expect(readTextFile(folder, { sessionId: 's', path: join(folder, 'missing.txt') }).content).toBe('');
});
