// Loaded before every test file (vitest setupFiles): whatever a test or a file's shared setup
// spawned is ended after it, so a failing test leaves no process behind (test/helpers/process-groups.ts);
// then the containers a real engine runs for its servers' agents (test/helpers/engines.ts), and the
// folders it made with tempDir (test/helpers/temp.ts).
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { killMarked, markSpawnsAs } from '../helpers/process-groups.js';
import { removeTestContainers } from '../helpers/engines.js';
import { removeTempDirs, tempDirs } from '../helpers/temp.js';

let tests = 0;
const FILE = 'file';

beforeAll(() => markSpawnsAs(FILE));
beforeEach(() => markSpawnsAs(`test-${++tests}`));
afterEach(() => {
  killMarked(`test-${tests}`);
  // What a file's shared setup (beforeAll) starts lives until afterAll.
  markSpawnsAs(FILE);
});
afterAll(() => {
  killMarked();
  removeTestContainers(tempDirs());
  removeTempDirs();
});
