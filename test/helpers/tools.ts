// The machine's tools that some tiers need: Debian's chromium (the dashboard's browser tests), a
// working bubblewrap (the sandbox tests), and the container engines dockerd and podman (the
// container tests). vitest.config.ts installs them where it can (root and apt-get, as .ci/run
// does) and starts dockerd, leaves test/browser out without a browser, says in one line what it
// skipped and how to get it, and fails under CI instead; the bwrap tests skip with
// `skipIf(!bwrapWorks)`, the container tests with `skipIf(!engineAnswers(engine))`, the remote
// engine's when a second engine cannot be started (startSecondDockerd, startSecondPodman), the
// ssh engine's without Debian's sshd.
import { accessSync, constants, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { BWRAP_PROBE } from '../../src/jobs/process/sandbox.js';
import {
  engineWorks,
  SECOND_DOCKER,
  SECOND_PODMAN,
  SSHD,
  startDockerd,
  startSecondDockerd,
  startSecondPodman,
} from './engines.js';

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

/**
 * What a tier needs (said as what is missing), the Debian packages that bring it (space-separated),
 * the tier, and how to start it once installed (a daemon).
 */
export type Tool = { missing: string; present: () => boolean; apt: string; tier: string; start?: () => boolean };

export const TOOLS: Tool[] = [
  { missing: `no ${CHROMIUM}`, present: hasChromium, apt: 'chromium', tier: 'the browser tests (test/browser)' },
  { missing: 'no working bwrap', present: bwrapRuns, apt: 'bubblewrap', tier: 'the bwrap sandbox tests' },
  {
    missing: 'no docker engine answering',
    present: () => engineWorks('docker'),
    apt: 'docker.io',
    tier: 'the docker container tests',
    start: startDockerd,
  },
  {
    missing: `no second docker engine at ${SECOND_DOCKER}`,
    present: () => engineWorks('docker', SECOND_DOCKER),
    apt: 'docker.io',
    tier: 'the tests of an engine that shares no files (test/e2e/remote-engine.test.ts)',
    start: startSecondDockerd,
  },
  {
    missing: 'no working podman',
    present: () => engineWorks('podman'),
    // podman's --init runs catatonit, which Debian's podman only recommends
    apt: 'podman catatonit',
    tier: 'the podman container tests',
  },
  {
    missing: `no second podman service at ${SECOND_PODMAN}`,
    present: () => engineWorks('podman', SECOND_PODMAN),
    apt: 'podman catatonit',
    tier: 'the tests of podman remote (test/e2e/remote-engine.test.ts)',
    start: startSecondPodman,
  },
  {
    missing: `no ${SSHD}`,
    present: () => existsSync(SSHD),
    apt: 'openssh-server',
    tier: 'the test of a docker engine over ssh (test/e2e/remote-engine.test.ts, an sshd of its own)',
  },
];
