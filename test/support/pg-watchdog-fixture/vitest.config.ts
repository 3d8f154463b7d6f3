import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// A vitest run with the suite's PostgreSQL global setup and one test that never ends: what
// pg-watchdog.test.ts kills to see the cluster go with it.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL(".", import.meta.url)),
    include: ["hold-run.fixture.ts"],
    globalSetup: ["../pg-global-setup.ts"],
    pool: "forks",
    testTimeout: 0,
  },
});
