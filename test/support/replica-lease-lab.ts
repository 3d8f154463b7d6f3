import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { TokenKind, TokenService } from "@farm/shared/gen/farm/v1/token_service_pb";
import { createTestDatabase } from "@farm/coordinator/db/testing/test-postgres";
import { attachFakeAgent, bearer, fakeDevices, type FakeAgent } from "./fake-agent.js";
import { startFarm, waitFor, type FarmProcess } from "./farm-process.js";
import { makeTempDir, type TempDir } from "./temp-dir.js";

export interface ReplicaLeaseLab {
  database: { url: string; drop(): Promise<void> };
  dir: TempDir;
  /** Three `farm coordinator` processes on one PostgreSQL database. */
  replicas: FarmProcess[];
  /** A LeaseService client per replica, as the admin. */
  leases: Client<typeof LeaseService>[];
  admin: string;
  /** The agents on replicas 0 and 1 (phones bench-0-* and bench-1-*). */
  agents: FakeAgent[];
  stop(): Promise<void>;
}

/**
 * Leases across replicas: three coordinators on one database, two
 * lightweight agents of five phones each attached to replicas 0 and 1 (so
 * replica 2 holds no agent), every replica seeing the ten phones online.
 */
export async function startReplicaLeaseLab(name: string): Promise<ReplicaLeaseLab> {
  const database = await createTestDatabase();
  const dir = await makeTempDir(name);
  const replicas: FarmProcess[] = [];
  const stopAgents = new AbortController();
  const stop = async () => {
    stopAgents.abort();
    for (const r of replicas) await r.stop();
    await dir.remove();
    await database.drop();
  };
  try {
    const data = join(dir.path, "coordinator");
    for (let i = 0; i < 3; i++) replicas.push(await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", data, "--database", database.url], { FARM_LOG_LEVEL: "warn" }));
    const admin = (await readFile(join(data, "admin.token"), "utf8")).trim();
    const transports = replicas.map((r) => createGrpcTransport({ baseUrl: String(r.ready["url"]), interceptors: [bearer(admin)] }));
    const leases = transports.map((t) => createClient(LeaseService, t));
    const tokens = createClient(TokenService, transports[0]!);
    const agents: FakeAgent[] = [];
    for (const i of [0, 1]) {
      const token = (await tokens.createToken({ name: `lab-${i}`, kind: TokenKind.AGENT })).token;
      agents[i] = await attachFakeAgent({ url: String(replicas[i]!.ready["url"]), token, index: i, devices: fakeDevices(i, 5), heartbeatMs: 500, signal: stopAgents.signal });
    }
    for (const t of transports) {
      const registry = createClient(RegistryService, t);
      await waitFor("10 phones online on every replica", async () => ((await registry.listDevices({})).devices.filter((d) => d.state === "device").length === 10 ? true : undefined));
    }
    return { database, dir, replicas, leases, admin, agents, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
