// A command line the operating system refuses (E2BIG: Linux takes at most 128 KiB in one
// argument) fails the job with "too large", never with the advice to install the CLI.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { codex } from '../../backends/codex.js';
import type { CliBackend } from '../../backends/types.js';
import { createApp, type App } from '../../src/app.js';

const open: Array<{ app: App; dir: string }> = [];
afterEach(async () => {
  for (const { app, dir } of open.splice(0)) {
    app.agents.close();
    await app.iac.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.runIf(process.platform === 'linux')('an argument over the per-argument limit fails as too large', async () => {
  // codex as it is, but with one argument the kernel refuses (and a file that surely exists).
  const oversized: CliBackend = {
    ...codex,
    command: (input, settings, ctx) => ({
      ...codex.command(input, settings, ctx),
      file: '/bin/true',
      args: ['x'.repeat(200 * 1024)],
    }),
  };
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-too-large-'));
  const app = createApp({ PATH: process.env.PATH!, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg') }, dir, () => true, [
    oversized,
  ]);
  open.push({ app, dir });
  const job = app.jobs.submit({
    backend: 'codex',
    model: app.models.codex!.default,
    prompt: 'hi',
    cwd: dir,
    timeoutS: 30,
    extra: {},
  });
  const { finished } = await app.jobs.waitFor([job.id], { timeoutMs: 30_000, mode: 'all' });
  const error = finished[0]?.outcome?.error ?? '';
  expect(finished[0]?.state).toBe('failed');
  expect(error).toMatch(/too large/);
  expect(error).not.toMatch(/install/i);
});
