import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// A vitest run whose one test starts a coordinator and never stops it: what farm-process-leak.test.ts
// runs to see the process go when the file's worker exits.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL(".", import.meta.url)),
    include: ["lose-coordinator.fixture.ts"],
    pool: "forks",
    testTimeout: 120_000,
  },
});
