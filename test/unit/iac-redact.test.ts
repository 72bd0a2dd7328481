// Secrets: configured key values and common key shapes, in text, in JSON, in files and in pages
// of a log whose edges cut a key.
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import { REDACTED, Redactor } from '../../src/lib/redact.js';
import { claude } from '../../backends/claude.js';
import { grok } from '../../backends/grok.js';
import { mistral } from '../../backends/mistral.js';
import { configuredSecrets } from '../../src/config/keys.js';
import { redactPage, scrubDir, scrubFile } from '../../src/lib/scrub.js';
import { guardExecutor } from '../../src/jobs/recorder.js';
import type { Executor } from '../../src/jobs/table.js';
import { readLogPage } from '../../src/jobs/process/log-page.js';
import { tempDir } from '../helpers/temp.js';

const SHAPED = {
  openai: 'sk-proj-AbCdEf0123456789GhIjKl',
  anthropic: 'sk-ant-api03-abcdefghijklmnop_QRSTUV-1234',
  xai: 'xai-AbCdEfGhIjKlMnOpQrStUv0123',
  google: 'AIzaSyA1234567890abcdefghijklmnopqrstu',
  github: 'ghp_abcdefghijklmnopqrstuvwxyz0123456789',
  githubPat: 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz',
  aws: 'AKIAIOSFODNN7EXAMPLE',
};
const MISTRAL = 'Zq8pT3xW9vLm2Nc7Rb4Ys6Hd1Kf0Ga5J'; // no recognizable shape: only its value betrays it
/** The vendors' key shapes, as createApp gives them to its Redactor. */
const keyShapes = backends.flatMap((b) => b.secretPatterns);

describe('Redactor', () => {
  const r = new Redactor([MISTRAL, 'short'], keyShapes);

  test.each(Object.entries(SHAPED))('%s keys are recognized by their shape', (_name, key) => {
    expect(r.text(`key=${key}; "${key}"\n${key}`)).toBe(`key=${REDACTED}; "${REDACTED}"\n${REDACTED}`);
  });

  test('configured values are redacted wherever they appear; short ones are ignored', () => {
    expect(r.text(`x${MISTRAL}y and ${MISTRAL}`)).toBe(`x${REDACTED}y and ${REDACTED}`);
    expect(r.text('a short word')).toBe('a short word');
  });

  test('Bearer tokens lose the token, not the word', () => {
    expect(r.text('Authorization: Bearer abc.DEF-123_456~789/xyz=')).toBe(`Authorization: Bearer ${REDACTED}`);
  });

  test('ordinary text is left alone', () => {
    const text = 'task-abcdefghijklmnopqrstuvwxyz, disk-usage, skeleton, AKIA lowercase, Bearer of news';
    expect(r.text(text)).toBe(text);
  });

  test('deep: every string in nested JSON, keys included', () => {
    const value = { a: [MISTRAL, { [SHAPED.github]: SHAPED.xai, n: 3, ok: true, nil: null }] };
    expect(r.deep(value)).toEqual({ a: [REDACTED, { [REDACTED]: REDACTED, n: 3, ok: true, nil: null }] });
  });

  test('configuredSecrets: backend keys from env and api_keys.json, and env names that say key or token', () => {
    const dir = tempDir('keys');
    writeFileSync(
      join(dir, 'api_keys.json'),
      JSON.stringify({ XAI_API_KEY: 'xai-file-value-123456', SOMETHING_ELSE: 'another-file-secret' }),
    );
    const env = { MISTRAL_API_KEY: MISTRAL, GITHUB_TOKEN: 'gh-token-value-xyz', HOME: '/root', PATH: '/usr/bin' };
    const values = configuredSecrets(
      [grok, mistral, claude],
      { projectDir: dir, userConfigDir: join(dir, 'none') },
      env,
    );
    expect(values).toEqual(
      expect.arrayContaining(['xai-file-value-123456', 'another-file-secret', MISTRAL, 'gh-token-value-xyz']),
    );
    expect(values).not.toContain('/root');
    expect(values).not.toContain('/usr/bin');
  });
});

describe('files and log pages', () => {
  const r = new Redactor([MISTRAL], keyShapes);

  test('scrubFile rewrites a file with a secret, even one across its 1 MB read chunks; a clean file is not touched', async () => {
    const dir = tempDir('scrub');
    const pad = 'x'.repeat((1 << 20) - 10);
    const dirty = join(dir, 'stdout.log');
    const text = `${pad} ${MISTRAL} middle ${SHAPED.github}\nend ${'é'.repeat(1000)} ${SHAPED.openai}`;
    writeFileSync(dirty, text);
    expect(await scrubFile(dirty, r)).toBe(true);
    expect(readFileSync(dirty, 'utf8')).toBe(
      `${pad} ${REDACTED} middle ${REDACTED}\nend ${'é'.repeat(1000)} ${REDACTED}`,
    );
    const clean = join(dir, 'clean.log');
    writeFileSync(clean, 'nothing here');
    expect(await scrubFile(clean, r)).toBe(false);
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'artifact.json'), JSON.stringify({ key: MISTRAL }));
    writeFileSync(join(dir, 'record.json'), 'left to the store');
    expect(await scrubDir(dir, r)).toEqual([join(dir, 'sub', 'artifact.json')]);
  });

  test('scrubFile never writes through a link left at its temp files (an agent can write its own run folder)', async () => {
    const dir = tempDir('scrub');
    const target = join(dir, 'the-users-file');
    writeFileSync(target, 'mine\n');
    for (const [name, text, tmp] of [
      ['small.log', `a ${MISTRAL} b`, `small.log.${process.pid}.tmp`],
      ['large.log', `${'x'.repeat(1 << 21)} ${MISTRAL}`, `large.log.scrub-${process.pid}`],
    ] as const) {
      writeFileSync(join(dir, name), text);
      symlinkSync(target, join(dir, tmp));
      expect(await scrubFile(join(dir, name), r)).toBe(true);
      expect(readFileSync(join(dir, name), 'utf8')).toContain(REDACTED);
      expect(readFileSync(target, 'utf8'), name).toBe('mine\n');
    }
  });

  test('redactPage masks the part of a secret that a page edge cuts', () => {
    const text = Buffer.from(`aaaa ${SHAPED.github} bbbb`);
    const keyStart = 5;
    for (let cut = keyStart + 1; cut < keyStart + SHAPED.github.length; cut += 7) {
      const first = redactPage(text.subarray(0, cut), Buffer.alloc(0), text.subarray(cut), r);
      const second = redactPage(text.subarray(cut), text.subarray(0, cut), Buffer.alloc(0), r);
      expect(first).toBe(`aaaa ${REDACTED}`);
      expect(second).toBe(`${REDACTED} bbbb`);
      expect(first + second).not.toContain(SHAPED.github.slice(4, 12));
    }
  });

  test('readLogPage: byte pages that end at line ends, reassemble to the file, and a tail', () => {
    const dir = tempDir('page');
    const path = join(dir, 'stdout.log');
    const lines = Array.from({ length: 500 }, (_, i) => `line ${i} ${'ü'.repeat(i % 7)} 🎉`);
    writeFileSync(path, `${lines.join('\n')}\n`);
    let offset = 0;
    let text = '';
    for (let pages = 0; ; pages++) {
      const page = readLogPage(path, { offset, limit: 1000 });
      expect(page.text.length).toBeGreaterThan(0);
      expect(page.text.endsWith('\n')).toBe(true);
      text += page.text;
      offset = page.next_offset;
      if (page.eof) break;
      expect(pages).toBeLessThan(100);
    }
    expect(text).toBe(readFileSync(path, 'utf8'));
    const tail = readLogPage(path, { tail: 50 });
    expect(tail.eof).toBe(true);
    expect(Buffer.byteLength(tail.text)).toBeLessThanOrEqual(50);
    expect(readFileSync(path, 'utf8').endsWith(tail.text)).toBe(true);
    expect(tail.text).not.toContain('\uFFFD');
    expect(readLogPage(join(dir, 'missing.log'), {})).toMatchObject({ size: 0, text: '', eof: true });
    // A single line longer than the page is cut at a character boundary.
    writeFileSync(path, '€'.repeat(1000));
    const page = readLogPage(path, { limit: 100 });
    expect(page.next_offset % 3).toBe(0);
    expect(page.text).toBe('€'.repeat(33));
  });

  test('guardExecutor: redacted outcome, output tail and thrown error; scrubbed run folder', async () => {
    const dir = tempDir('guard');
    const inner: Executor = async (job, control) => {
      writeFileSync(join(dir, 'stdout.log'), `printed ${MISTRAL}\n`);
      control.onOutputTail(() => `tail ${SHAPED.xai}`);
      if (job.prompt === 'throw') throw new Error(`boom ${MISTRAL}`);
      return {
        state: 'succeeded',
        outcome: { ok: true, text: `answer ${MISTRAL}`, costSource: 'unknown', raw: { key: SHAPED.openai } },
      };
    };
    const guarded = guardExecutor(
      inner,
      r,
      () => dir,
      () => undefined,
    );
    let tail: ((n: number) => string) | undefined;
    const control = { signal: new AbortController().signal, onOutputTail: (t: (n: number) => string) => (tail = t) };
    const job = {
      id: 'abc',
      backend: 'x',
      model: 'm',
      prompt: 'p',
      cwd: '/',
      timeoutS: 1,
      extra: {},
      state: 'running' as const,
      createdAt: '',
    };
    const result = await guarded(job, control);
    expect(result.outcome.text).toBe(`answer ${REDACTED}`);
    expect(result.outcome.raw).toEqual({ key: REDACTED });
    expect(tail!(100)).toBe(`tail ${REDACTED}`);
    expect(readFileSync(join(dir, 'stdout.log'), 'utf8')).toBe(`printed ${REDACTED}\n`);
    await expect(guarded({ ...job, prompt: 'throw' }, control)).rejects.toThrow(`boom ${REDACTED}`);
  });
});
