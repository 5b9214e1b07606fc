import { defineConfig } from 'vitest/config';

// One config for the monorepo. Container tests share one Docker engine on 2 cores, so files run
// in a small pool; long timeouts because real containers and git are involved.
export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'e2e/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default', './scripts/summary-reporter.ts'],
  },
});
