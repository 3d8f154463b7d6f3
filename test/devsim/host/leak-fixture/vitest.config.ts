import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// A vitest run whose one test starts a devsim adb server and never stops it: what adb-server-leak.test.ts
// runs to see the server go when the file's worker exits.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL(".", import.meta.url)),
    include: ["lose-adb-server.fixture.ts"],
    pool: "forks",
    testTimeout: 120_000,
  },
});
