import { defineConfig } from 'vitest/config';

// The contract tests: the real vendor CLIs (installed by test/contract/install-clis.sh)
// driven through the built server against the fake model API.
export default defineConfig({
  test: {
    include: ['test/contract/**/*.test.ts'],
    // Ends whatever a test spawned, even when it failed half-way.
    setupFiles: ['test/setup/end-processes.ts'],
    testTimeout: 180_000,
    hookTimeout: 600_000,
    fileParallelism: false,
  },
});
