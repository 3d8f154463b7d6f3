import { defineConfig } from "vitest/config";
import { DurationSequencer } from "./test/support/duration-sequencer.js";

// Two tiers (docs/testing.md). `unit` is every test that runs in one process
// or against devsim alone (state classes on in-memory SQLite, contract tests
// with an in-process agent): `make test`. `e2e` starts real coordinators,
// agents, adb servers and Chromium over loopback: `make e2e`.
const UNIT = ["{shared,client,agent,coordinator,cli,dashboard}/src/**/*.test.ts", "test/{devsim,contract,support}/**/*.test.ts"];
const E2E = ["test/{e2e,faults,deploy}/**/*.test.ts"];
// Our packages' built JavaScript (what @farm/* imports resolve to) is loaded by Node, not transformed
// by Vite: about a third less CPU where measured (docs/testing.md, "Where the time goes").
// FARM_TEST_NATIVE_DIST=0 puts it back through Vite.
const nativeDist = process.env["FARM_TEST_NATIVE_DIST"] === "0" ? {} : { server: { deps: { external: [/\/(shared|client|agent|coordinator|cli|test)\/dist\//] } } };

// One private PostgreSQL cluster per tier (storage tests, replicas); each file makes its own databases.
// One run dir per tier for what files build once and share (the packed CLI: test/support/packed-cli.ts).
const globalSetup = ["test/support/pg-global-setup.ts", "test/support/run-dir-global-setup.ts"];
// FARM_TEST_CPU_LOG=FILE: each file notes its CPU there (test/support/cpu-per-file.ts; scripts/test-cpu.mjs prints the table).
const setupFiles = process.env["FARM_TEST_CPU_LOG"] ? ["test/support/cpu-per-file.ts"] : [];

export default defineConfig({
  test: {
    exclude: ["**/node_modules/**", "**/dist/**"],
    // Suites start real processes (adb, coordinator, agents): give them room,
    // but keep two files at a time on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Longest files first, from recorded durations when vitest has none of its own (a clean clone).
    sequence: { sequencer: DurationSequencer },
    maxWorkers: 2,
    setupFiles,
    // expect.poll waits for a condition and returns as soon as it holds; Vitest's default bound
    // (1 s) failed dashboard tests under load although the page got there (a first render at load 20).
    expect: { poll: { timeout: 20_000 } },
    ...nativeDist,
    // Set per project, not at the root: a project that extends the root runs the root's global
    // setup again, and each run started two PostgreSQL clusters.
    projects: [
      { extends: true, test: { name: "unit", include: UNIT, globalSetup } },
      { extends: true, test: { name: "e2e", include: E2E, globalSetup } },
    ],
  },
});
