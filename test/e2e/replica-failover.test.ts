/**
 * A replica killed outright: three `farm coordinator` processes on one
 * PostgreSQL database behind a TCP balancer (as HAProxy would be), a real
 * agent attached through the balancer, CLIs pointed at each replica.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { createTestDatabase } from "@farm/coordinator/db/testing/test-postgres";
import { bearer } from "../support/fake-agent.js";
import { adbConnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { startTcpBalancer, type TcpBalancer } from "../support/tcp-balancer.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let database: { url: string; drop(): Promise<void> };
let dir: TempDir;
let adb: AdbServer;
let balancer: TcpBalancer;
let agent: FarmProcess;
let phone: SimDevice;
let serial: string;
let admin: string;
const replicas: (FarmProcess | undefined)[] = [];
const urls: string[] = [];

const envFor = (i: number) => ({ FARM_COORDINATOR: urls[i], FARM_TOKEN: admin, FARM_HOME: join(dir.path, `home-${i}`), FARM_CONFIG: join(dir.path, "none.json") });
const online = (i: number) => async () => {
  const list = ((await farm(["devices"], envFor(i))).json["devices"] ?? []) as { serial: string; state: string }[];
  return list.some((d) => d.serial === serial && d.state === "device") ? true : undefined;
};

async function holderOfAgent(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    const r = await client.query<{ url: string }>("SELECT r.url FROM agent_replicas a JOIN replicas r ON r.id = a.replica_id");
    return r.rows[0]?.url;
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  database = await createTestDatabase();
  dir = await makeTempDir("replica-failover");
  const data = join(dir.path, "coordinator");
  for (let i = 0; i < 3; i++) {
    const r = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", data, "--database", database.url]);
    replicas.push(r);
    urls.push(String(r.ready["url"]));
  }
  admin = (await readFile(join(data, "admin.token"), "utf8")).trim();
  balancer = await startTcpBalancer(() => urls);
  adb = await startAdbServer();
  phone = new SimDevice();
  serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
  const token = await farm(["token", "create", "--kind", "agent", "--name", "lab"], envFor(0));
  await writeFile(join(dir.path, "agent.token"), String(token.json["token"]), { mode: 0o600 });
  agent = await startFarm([
    "agent",
    "--coordinator",
    balancer.url,
    "--name",
    "lab",
    "--data-dir",
    join(dir.path, "agent"),
    "--token-file",
    join(dir.path, "agent.token"),
    "--adb-port",
    String(adb.port),
    "--no-adb-start",
    "--lock-dir",
    join(dir.path, "locks"),
    "--heartbeat-interval",
    "500",
  ]);
  for (let i = 0; i < 3; i++) await waitFor(`phone online on replica ${i}`, online(i));
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  for (const r of replicas) await r?.stop();
  await balancer?.close();
  await phone?.close();
  await adb?.stop();
  await dir?.remove();
  await database?.drop();
});

describe("a replica killed outright", () => {
  it("loses no lease: the agent re-attaches to another replica within its backoff and the lease's holder carries on", async () => {
    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], envFor(0));
    expect(lease.code).toBe(0);
    const token = String((lease.json["lease"] as { token: string }).token);
    const holding = await holderOfAgent();
    const victim = urls.indexOf(holding ?? "");
    expect(victim).toBeGreaterThanOrEqual(0);
    const survivors = [0, 1, 2].filter((i) => i !== victim);

    replicas[victim]?.kill("SIGKILL");
    await replicas[victim]?.exited;
    replicas[victim] = undefined;
    const killedAt = Date.now();
    // Back through a survivor (the shared database says which holds its stream), then online on every survivor.
    await waitFor("the agent attached to a survivor", async () => {
      const now = await holderOfAgent();
      return now !== undefined && now !== holding ? now : undefined;
    }, { timeoutMs: 20_000 });
    for (const i of survivors) await waitFor(`phone back online on replica ${i}`, online(i), { timeoutMs: 20_000 });
    expect(Date.now() - killedAt).toBeLessThan(15_000);

    for (const i of survivors) {
      const r = await farm(["shell", "--device", serial, "--", "echo", `after-${i}`], { ...envFor(i), FARM_LEASE: token });
      expect(JSON.stringify(r.json), `through replica ${i}`).toContain(`after-${i}`);
    }
    const leases = await farm(["lease", "list"], envFor(survivors[0] as number));
    expect(JSON.stringify(leases.json)).toContain(serial);
    expect((await farm(["lease", "release"], { ...envFor(survivors[1] as number), FARM_LEASE: token })).code).toBe(0);
  }, 90_000);
});

describe("a rolling restart of every replica", () => {
  it("drops no lease and no queued waiter: the holder renews after each restart, the waiter keeps its place and is granted", async () => {
    // Replicas left from the test before: start any that is down again on its own address.
    const data = join(dir.path, "coordinator");
    const startAt = async (i: number) => {
      replicas[i] = await startFarm(["coordinator", "--listen", `127.0.0.1:${new URL(urls[i] as string).port}`, "--data-dir", data, "--database", database.url]);
    };
    for (let i = 0; i < 3; i++) if (!replicas[i]) await startAt(i);
    for (let i = 0; i < 3; i++) await waitFor(`phone online on replica ${i}`, online(i), { timeoutMs: 20_000 });
    const client = (i: number) => createClient(LeaseService, createGrpcTransport({ baseUrl: urls[i] as string, interceptors: [bearer(admin)] }));
    const held = await client(0).acquireLease({ selector: { serial }, ttlMs: 120_000 });
    // A caller waiting for the phone, through replica 2 first. Its outcome is taken as soon as it comes
    // (the call may end while the test still waits for its replica to stop).
    const ticket = "rolling-waiter";
    const ask = (i: number) =>
      client(i)
        .acquireLease({ selector: { serial }, waitMs: 120_000, ttlMs: 60_000, ticket }, { timeoutMs: 130_000 })
        .then((granted) => ({ granted, error: undefined }), (e: unknown) => ({ granted: undefined, error: ConnectError.from(e) }));
    let waiting = ask(2);
    let via = 2;
    await waitFor("the waiter queued", async () => ((await client(0).listLeases({})).queue.some((w) => w.ticket === ticket) ? true : undefined));

    for (let i = 0; i < 3; i++) {
      await replicas[i]?.stop();
      if (i === via) {
        // Its replica stopped (the call ends: told so, or cut off): it asks again with the same ticket through another one.
        const ended = await waiting;
        expect(ended.granted).toBeUndefined();
        expect(ended.error).toBeInstanceOf(ConnectError);
        via = (i + 1) % 3;
        waiting = ask(via);
      }
      await startAt(i);
      await waitFor(`phone online on replica ${i} again`, online(i), { timeoutMs: 20_000 });
      // The lease outlived the restart: its holder renews it through the replica that just came back.
      const renewed = await client(i).renewLease({ token: held.token, ttlMs: 120_000 });
      expect(renewed.lease?.leaseId).toBe(held.lease?.leaseId);
      expect((await client(i).listLeases({})).queue.map((w) => w.ticket)).toEqual([ticket]);
    }
    await client(1).releaseLease({ token: held.token });
    const { granted } = await waiting;
    expect(granted?.lease?.serial).toBe(serial);
    await client(0).releaseLease({ token: granted?.token ?? "" });
  }, 150_000);
});
