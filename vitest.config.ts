import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{shared,agent,coordinator,cli}/src/**/*.test.ts", "test/{devsim,e2e,faults,deploy,contract}/**/*.test.ts"],
    exclude: ["**/node_modules/**", "**/dist/**"],
    // Suites start real processes (adb, coordinator, agents): give them room,
    // but keep two files at a time on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One private PostgreSQL cluster for the run (storage tests, replicas); each file makes its own databases.
    globalSetup: ["test/support/pg-global-setup.ts"],
    pool: "forks",
    maxWorkers: 2,
  },
});
