// The machine's tools that two tiers need: Debian's chromium (the dashboard's browser tests) and
// a working bubblewrap (the sandbox tests). vitest.config.ts installs them where it can (root
// and apt-get, as .ci/run does), leaves test/browser out without a browser, says in one line
// what it skipped and how to get it, and fails under CI instead; the bwrap tests skip with
// `skipIf(!bwrapWorks)`.
import { accessSync, constants } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { BWRAP_PROBE } from '../../src/jobs/process/sandbox.js';

/** Debian's chromium: what the browser tests launch (playwright-core, no browser download). */
export const CHROMIUM = '/usr/bin/chromium';

const executable = (file: string) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

export const hasChromium = () => executable(CHROMIUM);

/** bwrap on PATH makes a sandbox here (a container may forbid the namespaces it needs). */
function bwrapRuns(): boolean {
  const probe = spawnSync('bwrap', [...BWRAP_PROBE, 'true'], { stdio: 'ignore', timeout: 10_000 });
  return probe.status === 0;
}

/** Checked once per test file that asks: the sandbox tests skip without it. */
export const bwrapWorks = bwrapRuns();

/** What a tier needs (said as what is missing), the Debian package that brings it, and the tier. */
export type Tool = { missing: string; present: () => boolean; apt: string; tier: string };

export const TOOLS: Tool[] = [
  { missing: `no ${CHROMIUM}`, present: hasChromium, apt: 'chromium', tier: 'the browser tests (test/browser)' },
  { missing: 'no working bwrap', present: bwrapRuns, apt: 'bubblewrap', tier: 'the bwrap sandbox tests' },
];
