/**
 * `make demo`: a private adb server, two simulated phones, `farm standalone`,
 * and `farm devices` through the coordinator. Serves until Ctrl-C.
 */
import { mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { startAdbServer, startDevsim } from "../devsim/index.js";
import { farm, farmBin, startFarm, waitFor } from "../support/farm-process.js";

// The repo root, found from the CLI's location (cli/dist/main.js).
const repo = dirname(dirname(dirname(farmBin)));
const home = join(repo, ".farm", "demo");

async function main(): Promise<void> {
  await rm(home, { recursive: true, force: true });
  await mkdir(home, { recursive: true, mode: 0o700 });
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
  };
  try {
    await waitFor("both phones in the coordinator", async () => {
      const r = await farm(["devices"], env);
      const list = r.json["devices"] as { state: string; properties: { model: string } }[] | undefined;
      return list && list.length === 2 && list.every((d) => d.state === "device" && d.properties.model) ? true : undefined;
    });
    const devices = await farm(["devices", "--output", "pretty"], env);
    const cli = `node ${farmBin}`;
    console.log(`\nfarm standalone is serving on ${url}\n\n$ farm devices\n${devices.stdout}`);
    console.log(
      [
        "Try, in another shell:",
        `  export FARM_HOME=${home}`,
        `  ${cli} devices --output pretty`,
        `  ${cli} agents --output pretty`,
        `  ${cli} token list --output pretty`,
        `  curl ${url}/healthz`,
        `  ${cli} evidence capture --device ${sim.devices[0]?.serial ?? "SERIAL"} /tmp/farm-demo-bundle`,
        "",
        `Dashboard: ${url}/dashboard/ (sign in with the admin token in ${home}/admin.token)`,
        "",
        `Simulated phones: ${sim.devices.map((d) => d.serial).join(", ")} on the adb server at port ${adb.port}`,
        `  ANDROID_ADB_SERVER_PORT=${adb.port} adb devices -l`,
        "",
        "Ctrl-C stops everything.",
      ].join("\n"),
    );
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
