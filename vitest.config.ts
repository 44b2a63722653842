import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/system/e2e/**', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: each file starts its own database (PGlite in memory or a PostgreSQL schema).
    maxWorkers: 2,
    fileParallelism: true,
  },
});
