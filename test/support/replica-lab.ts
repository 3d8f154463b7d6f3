import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createTestDatabase } from "@farm/coordinator/db/testing/test-postgres";
import { adbConnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { farm, startFarm, type FarmProcess } from "./farm-process.js";
import { deviceListed } from "./device-listed.js";
import { makeTempDir, type TempDir } from "./temp-dir.js";
import { HEARTBEAT_INTERVAL } from "./heartbeat.js";

/**
 * Coordinator replicas on one PostgreSQL database of the run's cluster,
 * one lab host (an adb server with a simulated phone) whose agent attaches
 * to replica 0, and an admin CLI environment per replica. Every replica
 * lists the phone online before this resolves.
 */
export interface ReplicaLab {
  dir: TempDir;
  replicas: FarmProcess[];
  /** Admin CLI environment per replica. */
  envs: NodeJS.ProcessEnv[];
  admin: string;
  adb: AdbServer;
  phone: SimDevice;
  serial: string;
  agent: FarmProcess;
  urlOf(i: number): string;
  stop(): Promise<void>;
}

export interface ReplicaLabOptions {
  replicas?: number;
  /** One data dir for all (as a shared mount would be), or one each (the default: nothing shared but the database). */
  sharedDataDir?: boolean;
  serialno?: string;
  agentName?: string;
  /** More arguments for every replica's `farm coordinator` (the same policy on all, as a site runs them). */
  coordinatorArgs?: string[];
}

export async function startReplicaLab(name: string, opts: ReplicaLabOptions = {}): Promise<ReplicaLab> {
  const database = await createTestDatabase();
  const dir = await makeTempDir(name);
  const replicas: FarmProcess[] = [];
  const started: { stop(): Promise<unknown> }[] = [];
  try {
    const dataDir = (i: number) => join(dir.path, opts.sharedDataDir ? "coordinator" : `coordinator-${i}`);
    for (let i = 0; i < (opts.replicas ?? 2); i++) {
      const r = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", dataDir(i), "--database", database.url, ...(opts.coordinatorArgs ?? [])], { FARM_LOG_LEVEL: "warn" });
      replicas.push(r);
      started.push(r);
    }
    const urlOf = (i: number) => String(replicas[i]?.ready["url"]);
    // The first start wrote the admin token; the others found tokens in the database.
    const admin = (await readFile(join(dataDir(0), "admin.token"), "utf8")).trim();
    const envs = replicas.map((_, i) => ({ FARM_COORDINATOR: urlOf(i), FARM_TOKEN: admin, FARM_HOME: join(dir.path, `home-${i}`), FARM_CONFIG: join(dir.path, "none.json") }));
    const adb = await startAdbServer();
    started.push(adb);
    const phone = new SimDevice(opts.serialno ? { serialno: opts.serialno } : {});
    started.push({ stop: () => phone.close() });
    const serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
    const agentName = opts.agentName ?? "lab-0";
    const token = await farm(["token", "create", "--kind", "agent", "--name", agentName], envs[0]);
    const tokenFile = join(dir.path, "agent.token");
    await writeFile(tokenFile, String(token.json["token"]), { mode: 0o600 });
    const agent = await startFarm([
      "agent",
      "--coordinator",
      urlOf(0),
      "--name",
      agentName,
      "--data-dir",
      join(dir.path, "agent"),
      "--token-file",
      tokenFile,
      "--adb-port",
      String(adb.port),
      "--no-adb-start",
      "--lock-dir",
      join(dir.path, "locks"),
      "--heartbeat-interval",
      HEARTBEAT_INTERVAL,
    ]);
    started.push(agent);
    await Promise.all(replicas.map((_, i) => deviceListed(urlOf(i), admin, serial)));
    return {
      dir,
      replicas,
      envs,
      admin,
      adb,
      phone,
      serial,
      agent,
      urlOf,
      async stop() {
        await agent.stop();
        for (const r of replicas) await r.stop();
        await phone.close();
        await adb.stop();
        await dir.remove();
        await database.drop();
      },
    };
  } catch (err) {
    for (const s of started.reverse()) await s.stop().catch(() => undefined);
    await dir.remove().catch(() => undefined);
    await database.drop().catch(() => undefined);
    throw err;
  }
}
