import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "vitest";
import { startFarm } from "../farm-process.js";

// Starts a coordinator, says its pid, and ends without stopping it (as a file whose hook timed out does).
it("loses a coordinator", async () => {
  const out = String(process.env["FARM_LEAK_OUT"]);
  const coordinator = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(out, "..", "coordinator")]);
  writeFileSync(out, String(coordinator.pid));
});
