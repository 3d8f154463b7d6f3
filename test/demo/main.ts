/**
 * `make demo`: a private adb server, two simulated phones, `farm standalone`,
 * and `farm devices` through the coordinator. Serves until Ctrl-C.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAdbServer, startDevsim } from "../devsim/index.js";
import { farm, farmBin, startFarm, waitFor } from "../support/farm-process.js";
import { demoCommands } from "./commands.js";

async function main(): Promise<void> {
  // A fresh home per run: two demos (in a row or side by side) never share a path.
  const home = await mkdtemp(join(tmpdir(), "farm-demo-"));
  await chmod(home, 0o700);
  console.log("starting a private adb server...");
  const adb = await startAdbServer();
  console.log(`starting two simulated phones and connecting them to adb on port ${adb.port}...`);
  const sim = await startDevsim({ devices: 2, adbPort: adb.port });
  const env = { FARM_HOME: home, ANDROID_ADB_SERVER_PORT: String(adb.port), FARM_LOG_LEVEL: "warn" };
  console.log("starting farm standalone (coordinator + agent)...");
  const standalone = await startFarm(["standalone", "--listen", "127.0.0.1:0", "--adb-port", String(adb.port)], env);
  const url = String(standalone.ready["url"]);
  const stop = async () => {
    await standalone.stop();
    await sim.stop();
    await adb.stop();
    await rm(home, { recursive: true, force: true });
  };
  try {
    await waitFor("both phones in the coordinator", async () => {
      const r = await farm(["devices"], env);
      const list = r.json["devices"] as { state: string; properties: { model: string } }[] | undefined;
      return list && list.length === 2 && list.every((d) => d.state === "device" && d.properties.model) ? true : undefined;
    });
    const devices = await farm(["devices", "--output", "pretty"], env);
    console.log(`\nfarm standalone is serving on ${url}\n\n$ farm devices\n${devices.stdout}`);
    const serials = sim.devices.map((d) => d.serial);
    console.log(demoCommands({ home, farmBin, url, serials, adbPort: adb.port }).join("\n"));
  } catch (err) {
    await stop();
    throw err;
  }
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  console.log("\nstopping...");
  await stop();
}

await main();
