import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'devkit/**/*.test.ts'],
    // Under CI, fails the run when DATABASE_URL or REDIS_URL would let their suites be skipped.
    globalSetup: ['test/support/ci-stores.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
});
