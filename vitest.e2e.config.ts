import { defineConfig } from 'vitest/config';

/** Browser tests of the admin console (npm run test:e2e): Debian's chromium driven by playwright-core. */
export default defineConfig({
  test: {
    include: ['test/system/e2e/**/*.e2e.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
  },
});
