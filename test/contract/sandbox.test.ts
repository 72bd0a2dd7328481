// The real claude and codex CLIs in bubblewrap (sandbox: bwrap, network on: the fake model API
// is on the host's loopback), through the built server: they start from what the sandbox binds
// (their installation, their own state folder, the project), answer, and resume. A `bwrap` ahead of the
// real one on PATH writes down each command line it is given, which must hold no secret.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import which from 'which';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startContractRig, type ContractRig } from './clis.js';

type Job = { agent_id: string; state: string; text?: string; error?: string; sandbox?: string; session_id?: string };

const realBwrap = which.sync('bwrap');
const wrapperDir = mkdtempSync(join(tmpdir(), 'polyspawn-contract-bwrap-'));
writeFileSync(
  join(wrapperDir, 'bwrap'),
  `#!/bin/sh\nprintf '%s\\n' "$@" > "${wrapperDir}/argv.$$"\nexec ${realBwrap} "$@"\n`,
);
chmodSync(join(wrapperDir, 'bwrap'), 0o755);

let rig: ContractRig;
beforeAll(async () => {
  rig = await startContractRig({
    PATH: `${wrapperDir}${delimiter}${process.env.PATH}`,
    POLYSPAWN_CLAUDE_SANDBOX: 'bwrap',
    POLYSPAWN_CODEX_SANDBOX: 'bwrap',
  });
}, 900_000);

afterAll(async () => {
  await rig?.close();
  rmSync(wrapperDir, { recursive: true, force: true });
});

const commandLines = () =>
  readdirSync(wrapperDir)
    .filter((f) => f.startsWith('argv.'))
    .map((f) => readFileSync(join(wrapperDir, f), 'utf8').trimEnd().split('\n'));

describe.each(['claude', 'codex'])('%s in bwrap, the real CLI', (backend) => {
  test('answers through the sandbox, then resumes the session; its command line holds no key or token', async () => {
    const mark = `sandboxed-${backend}-${Date.now()}`;
    const job = await rig.server.callOk<Job>(`spawn_${backend}`, { prompt: `${mark} say hello`, wait_s: 150 });
    expect(job, JSON.stringify(job)).toMatchObject({
      state: 'succeeded',
      sandbox: 'bwrap',
      text: `FAKE REPLY (turn 1): ${mark} say hello`,
    });
    expect(rig.api.requests.some((r) => r.rawBody.includes(mark))).toBe(true);
    const argv = commandLines().find(
      (a) => a.includes(rig.server.projectDir) && a.includes(backend === 'claude' ? '--verbose' : 'exec'),
    );
    expect(argv).toBeDefined();
    expect(argv).toEqual(expect.arrayContaining(['--die-with-parent', '--unshare-pid', '--tmpfs']));
    const text = argv!.join(' ');
    expect(text).not.toMatch(/psp_|sk-ant-contract-test|contract-test-key/);
    // For the record: the issue asks to see it.
    console.log(`${backend} ran as: bwrap ${argv!.join(' ')}`);

    // Its session was kept in its own state folder, bound read-write: the next turn continues it.
    const again = await rig.server.callOk<Job>(`spawn_${backend}`, {
      prompt: `${mark} and again`,
      resume: job.agent_id,
      wait_s: 150,
    });
    expect(again, JSON.stringify(again)).toMatchObject({
      state: 'succeeded',
      text: `FAKE REPLY (turn 2): ${mark} and again`,
      session_id: job.session_id,
    });
  });
});
