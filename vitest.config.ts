import { spawnSync } from 'node:child_process';
import { defineConfig } from 'vitest/config';
import { TOOLS } from './test/helpers/tools.js';

/**
 * What the browser, sandbox and container tiers need (test/helpers/tools.ts): installed (and a
 * daemon started) where this can
 * (root and apt-get, as .ci/run does; POLYSPAWN_TEST_INSTALL=0 does not), else those tiers are
 * skipped with one line that says which and how to get them. Under CI nothing may be skipped.
 */
function missingTools() {
  let missing = TOOLS.filter((tool) => !tool.present());
  const canInstall = process.getuid?.() === 0 && process.env.POLYSPAWN_TEST_INSTALL !== '0';
  if (missing.length && canInstall && spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status === 0) {
    const packages = missing.flatMap((tool) => tool.apt.split(' '));
    process.stderr.write(`installing ${packages.join(' ')} for the tests (apt-get, as .ci/run does)\n`);
    const apt = (args: string[]) =>
      spawnSync('apt-get', args, {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      });
    if (apt(['update', '-qq']).status === 0) apt(['install', '-y', '-qq', ...packages]);
    missing = missing.filter((tool) => !tool.present() && !tool.start?.());
  }
  if (missing.length === 0) return [];
  const how = `apt-get install -y ${missing.map((tool) => tool.apt).join(' ')} (as root), or run .ci/run`;
  const what = missing.map((tool) => `${tool.tier}, ${tool.missing}`).join('; ');
  if (process.env.CI && process.env.CI !== 'false' && process.env.CI !== '0')
    throw new Error(`CI runs every tier, but ${what} cannot run here: ${how}`);
  process.stderr.write(`skipped: ${what}: ${how}\n`);
  return missing;
}

const missing = missingTools();

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: [
      'test/contract/**',
      'node_modules/**',
      // Without a browser the whole tier is left out (said above); the bwrap tests skip one by one.
      ...(missing.some((tool) => tool.apt === 'chromium') ? ['test/browser/**'] : []),
    ],
    // Ends whatever a test spawned, even when it failed half-way.
    setupFiles: ['test/setup/end-processes.ts'],
    // Warns about the polyspawn-* folders a run leaves behind.
    globalSetup: ['test/setup/temp-guard.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
