// The mutation check (scripts/mutation-check.mjs) anchors each deliberate bug on an exact piece
// of code. When the code changes under an anchor, the check cannot run: this fast test says so
// in `npm test`, long before anyone runs the slow check.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { repoRoot } from '../helpers/mcp.js';

test("every mutation's anchor occurs exactly once in its file", () => {
  const run = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'mutation-check.mjs'), '--anchors'], {
    encoding: 'utf8',
  });
  expect(run.stderr + run.stdout).toMatch(/all \d+ anchors found once/);
  expect(run.status).toBe(0);
});
