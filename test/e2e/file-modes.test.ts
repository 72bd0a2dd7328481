// The run store is the user's alone (it holds prompts, answers and logs; agent.md may hold an
// MCP server's token): files 0600, folders 0700, whatever the umask. IAC.md is meant to be
// read: it gets the mode the umask gives.
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { startServer } from '../helpers/mcp.js';

const mode = (path: string) => statSync(path).mode & 0o777;
const under = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? [join(dir, e.name), ...under(join(dir, e.name))] : [join(dir, e.name)],
  );

test('run store files are 0600 and its folders 0700; agent.md 0600; IAC.md as the umask gives', async () => {
  const projectDir = mkdtempSync(join(tmpdir(), 'polyspawn-modes-'));
  const s = await startServer({ projectDir });
  try {
    const job = await s.callOk<{ state: string }>('spawn_codex', { prompt: 'modes', wait_s: 30 });
    expect(job.state).toBe('succeeded');
    await s.callOk('define_agent', {
      name: 'keeper',
      description: 'Keeps.',
      backend: 'claude',
      system_prompt: 'You keep.',
      mcp_servers: { docs: { url: 'https://docs.example.com/mcp', headers: { Authorization: 'Bearer x' } } },
    });
  } finally {
    await s.close();
  }
  const store = join(projectDir, '.polyspawn');
  const entries = [store, ...under(store)].filter((p) => !p.endsWith('.lock'));
  expect(entries.some((p) => p.endsWith('stdout.log'))).toBe(true);
  expect(entries.some((p) => p.endsWith('agent.md'))).toBe(true);
  for (const path of entries) expect([path, mode(path)]).toEqual([path, statSync(path).isDirectory() ? 0o700 : 0o600]);
  // What a new file gets under this umask (process.umask() cannot be read in a worker).
  writeFileSync(join(projectDir, 'plain.txt'), '');
  expect(mode(join(projectDir, 'IAC.md'))).toBe(mode(join(projectDir, 'plain.txt')));
  rmSync(projectDir, { recursive: true, force: true });
});
