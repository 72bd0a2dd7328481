// The built server starts through a V8 code cache (src/boot.ts): the first `serve` writes it, the
// next ones use it, and a cache that is damaged, another bundle's, or switched off never changes
// what the server answers.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { startServer } from '../helpers/mcp.js';
import { waitFor, waitGone } from '../helpers/processes.js';

const roots: string[] = [];
afterAll(() => {
  for (const dir of roots) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-code-cache-'));
  roots.push(dir);
  return dir;
}
const cacheFiles = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.v8cache')) : []);

/**
 * One session: tools/list and a tool call, then the client goes away. Returns the tool names once
 * the server process is gone: the cache is written at exit at the latest, and `close()` may
 * return before (it waits for the exit only so long, then signals).
 */
async function session(env: Record<string, string>): Promise<string[]> {
  const s = await startServer({ env });
  const pid = s.transport.pid!;
  try {
    const { tools } = await s.client.listTools();
    await s.callOk('list');
    return tools.map((t) => t.name).sort();
  } finally {
    await s.close();
    await waitGone(pid, 30_000);
  }
}

describe('the code cache', () => {
  test('the first session writes it, the next ones use it and leave it alone', async () => {
    const dir = tempDir();
    const env = { POLYSPAWN_CODE_CACHE: dir };
    const first = await session(env);
    await waitFor('the cache file', () => cacheFiles(dir).length === 1);
    const [name] = cacheFiles(dir);
    expect(name).toMatch(
      new RegExp(`^cli-[0-9a-f]{8}-${process.version.replaceAll('.', '\\.')}-${process.arch}\\.v8cache$`),
    );
    const written = readFileSync(join(dir, name!));
    expect(await session(env)).toEqual(first);
    expect(readFileSync(join(dir, name!)).equals(written)).toBe(true);
    expect(readdirSync(dir)).toEqual([name]); // no temp file left
  });

  /** A first session writes the cache; `change` alters the file; the next session answers the same and rewrites it. */
  async function answersAndRewrites(change: (data: Buffer) => Buffer): Promise<void> {
    const dir = tempDir();
    const env = { POLYSPAWN_CODE_CACHE: dir };
    const expected = await session(env);
    await waitFor('the cache file', () => cacheFiles(dir).length === 1);
    const file = join(dir, cacheFiles(dir)[0]!);
    const changed = change(readFileSync(file));
    writeFileSync(file, changed);
    expect(await session(env)).toEqual(expected);
    await waitFor('the cache to be rewritten', () => !readFileSync(file).equals(changed));
  }

  test('a damaged cache is rejected, not run, and replaced', () =>
    answersAndRewrites((data) => {
      const from = Math.floor(data.length / 3);
      for (let i = from; i < from + 512; i++) data[i]! ^= 0x5a;
      return data;
    }));

  test("another bundle's cache at the same path is replaced", () =>
    answersAndRewrites((data) => Buffer.concat([Buffer.from('0123456789abcdef'), data.subarray(16)])));

  test('it goes to $XDG_CACHE_HOME/polyspawn, and POLYSPAWN_CODE_CACHE=0 turns it off', async () => {
    const xdg = tempDir();
    const expected = await session({ XDG_CACHE_HOME: xdg, POLYSPAWN_CODE_CACHE: '' });
    await waitFor('the cache file', () => cacheFiles(join(xdg, 'polyspawn')).length === 1);
    const off = tempDir();
    expect(await session({ XDG_CACHE_HOME: off, POLYSPAWN_CODE_CACHE: '0' })).toEqual(expected);
    expect(readdirSync(off)).toEqual([]); // the server has exited: nothing more will be written
  });
});
