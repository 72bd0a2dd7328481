import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/contract/**', 'node_modules/**'],
    // Ends whatever a test spawned, even when it failed half-way.
    setupFiles: ['test/setup/end-processes.ts'],
    // Warns about the polyspawn-* folders a run leaves behind.
    globalSetup: ['test/setup/temp-guard.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
