import { defineConfig } from 'vitest/config';

/**
 * Test files that measure their own process (heap, RSS, event-loop lag), a module's first load or a module's state:
 * each runs in a fresh process. Every other file shares its worker process with the files run before it (isolate:
 * false): the app's modules are loaded once per worker instead of once per file, which takes about a third off the
 * suite's time. A file that fails only after another one ran belongs in this list (docs/TESTING.md, "Test
 * processes").
 */
export const ISOLATED = [
  'test/db/pglite-memory.test.ts',
  'test/kernel/cache.test.ts',
  // newId never goes back in time within a process: a file run before it with a clock in 2040 moves its ids there.
  'test/kernel/ids.test.ts',
  'test/limits/tokens.test.ts',
  'test/security/uploads.test.ts',
  'test/security/templates-and-patterns.test.ts',
];

const shared = {
  testTimeout: 30_000,
  hookTimeout: 60_000,
  pool: 'forks' as const,
};

export default defineConfig({
  test: {
    // Two cores: each file starts its own database (PGlite in memory or a PostgreSQL schema).
    maxWorkers: 2,
    fileParallelism: true,
    projects: [
      {
        test: {
          ...shared,
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: ['test/system/e2e/**', 'node_modules/**', ...ISOLATED],
          isolate: false,
        },
      },
      {
        test: { ...shared, name: 'isolated', include: ISOLATED, isolate: true },
      },
    ],
  },
});
