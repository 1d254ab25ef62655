import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['apps/*/test/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    globals: false,
    globalSetup: ['packages/testkit/src/global-setup.ts'],
    // fast-check properties draw the same cases on every run (FC_SEED overrides); see the file.
    setupFiles: ['test/helpers/pin-fast-check-seed.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
  },
});
