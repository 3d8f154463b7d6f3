import { writeFileSync } from "node:fs";
import { inject, it } from "vitest";

// Says where the run's cluster is and which process runs this test, then holds the run open until it is killed.
it("holds the run open", async () => {
  writeFileSync(String(process.env["FARM_PG_WATCHDOG_OUT"]), JSON.stringify({ pgUrl: inject("pgUrl"), workerPid: process.pid }));
  await new Promise(() => undefined);
});
