import { writeFileSync } from "node:fs";
import { it } from "vitest";
import { startAdbServer } from "../adb-server.js";

// Starts an adb server, says its pid and port, and ends without stopping it (as a file whose test timed out does).
it("loses an adb server", async () => {
  const server = await startAdbServer();
  writeFileSync(String(process.env["DEVSIM_LEAK_OUT"]), JSON.stringify({ pid: server.pid, port: server.port }));
});
