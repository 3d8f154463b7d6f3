import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { adbConnect, SimDevice, startAdbServer, type AdbServer, type SimDeviceOptions } from "../devsim/index.js";
import { startFarm, type FarmProcess } from "./farm-process.js";
import { deviceListed } from "./device-listed.js";
import { makeTempDir, type TempDir } from "./temp-dir.js";
import { HEARTBEAT_INTERVAL } from "./heartbeat.js";

/**
 * A one-machine lab for end-to-end tests: a private adb server, `farm
 * standalone` as its own process, and simulated phones added on demand.
 */
export interface Lab {
  dir: TempDir;
  adb: AdbServer;
  standalone: FarmProcess;
  /** Environment for CLI calls: the standalone's home, nothing else. */
  env: NodeJS.ProcessEnv;
  standaloneArgs: string[];
  addDevice(opts?: SimDeviceOptions): Promise<{ device: SimDevice; serial: string }>;
  /** Restarts standalone (after a kill) with the same data dir. */
  restart(): Promise<FarmProcess>;
  stop(): Promise<void>;
}

/**
 * `logLevel` for the standalone process; tests default to debug, benchmarks run at info as deployed.
 * `args`: more flags for standalone (limits such as --evidence-quota).
 */
export async function startLab(name: string, opts: { logLevel?: "debug" | "info"; args?: string[] } = {}): Promise<Lab> {
  const dir = await makeTempDir(name);
  const adb = await startAdbServer().catch(async (err: unknown) => {
    await dir.remove();
    throw err;
  });
  const env = { FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json"), FARM_COORDINATOR: "", FARM_TOKEN: "", ...(opts.logLevel ? { FARM_LOG_LEVEL: opts.logLevel } : {}) };
  const standaloneArgs = ["standalone", "--listen", "127.0.0.1:0", "--adb-port", String(adb.port), "--lock-dir", join(dir.path, "locks"), "--no-adb-start", "--heartbeat-interval", HEARTBEAT_INTERVAL, ...(opts.args ?? [])];
  const devices: SimDevice[] = [];
  const lab: Lab = {
    dir,
    adb,
    env,
    standaloneArgs,
    // A standalone that never got ready leaves nothing behind: the file's afterAll has no lab to stop.
    standalone: await startFarm(standaloneArgs, env).catch(async (err: unknown) => {
      await adb.stop();
      await dir.remove();
      throw err;
    }),
    async addDevice(opts = {}) {
      const device = new SimDevice(opts);
      devices.push(device);
      const port = await device.listen();
      const serial = await adbConnect(adb.port, "127.0.0.1", port);
      await deviceListed(String(lab.standalone.ready["url"]), (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim(), serial);
      return { device, serial };
    },
    async restart() {
      // Same address, so clients that are retrying find it again.
      const port = new URL(String(lab.standalone.ready["url"])).port;
      const args = standaloneArgs.map((a) => (a === "127.0.0.1:0" ? `127.0.0.1:${port}` : a));
      lab.standalone = await startFarm(args, env);
      return lab.standalone;
    },
    async stop() {
      await lab.standalone.stop();
      for (const d of devices) await d.close();
      await adb.stop();
      await dir.remove();
    },
  };
  return lab;
}
