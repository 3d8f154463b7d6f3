/**
 * `farm coordinator --database postgres://…`: the coordinator and agent as
 * their own processes, everything the coordinator keeps in the test run's
 * PostgreSQL. A second coordinator process with an empty data dir takes over
 * on the same address and finds the tokens, the lease, the labels and the
 * activity where the first left them: they were in the database, not on disk.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { createTestDatabase } from "@farm/coordinator/db/testing/test-postgres";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

let database: { url: string; drop(): Promise<void> };
let lab: SplitFarm;
let phone: SimDevice;
let serial: string;
let second: FarmProcess | undefined;

const online = async () => {
  const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; online: boolean; properties: { physicalId: string } }[];
  return list.find((d) => d.serial === serial && d.state === "device" && d.properties.physicalId);
};

beforeAll(async () => {
  database = await createTestDatabase();
  lab = await startSplitFarm("pg-coordinator", { coordinatorArgs: ["--database", database.url] });
  phone = new SimDevice();
  serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor(`${serial} listed`, online);
});

afterAll(async () => {
  await second?.stop();
  await lab?.stop();
  await phone?.close();
  await database?.drop();
});

describe("a coordinator on PostgreSQL", () => {
  it("keeps tokens, leases, labels and activity in the database, where a new coordinator process finds them", async () => {
    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], lab.env);
    expect(lease.code).toBe(0);
    const leaseToken = String((lease.json["lease"] as { token: string }).token);
    const asHolder = { ...lab.env, FARM_LEASE: leaseToken };
    const shell = await farm(["shell", "--device", serial, "--", "echo", "from-pg"], asHolder);
    expect(shell.json).toMatchObject({ ok: true });
    expect(JSON.stringify(shell.json)).toContain("from-pg");
    expect((await farm(["device", "label", "set", serial, "rack=pg1"], asHolder)).code).toBe(0);
    const user = await farm(["token", "create", "--kind", "user", "--name", "ci-bot"], lab.env);
    expect(user.code).toBe(0);

    // The rows are in PostgreSQL, not in the data dir.
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const rows = await client.query<{ leases: number; labels: number; tokens: number; shells: number }>(
        `SELECT (SELECT count(*)::int FROM leases WHERE state = 'active') AS leases,
                (SELECT count(*)::int FROM device_labels WHERE value = 'pg1') AS labels,
                (SELECT count(*)::int FROM tokens WHERE name = 'ci-bot') AS tokens,
                (SELECT count(*)::int FROM activity WHERE command LIKE '%hell%') AS shells`,
      );
      expect(rows.rows[0]).toEqual({ leases: 1, labels: 1, tokens: 1, shells: 1 });
    } finally {
      await client.end();
    }

    // Another coordinator process, another (empty) data dir, the same address and database.
    const port = new URL(lab.url).port;
    await lab.coordinator.stop();
    second = await startFarm(["coordinator", "--listen", `127.0.0.1:${port}`, "--data-dir", join(lab.dir.path, "coordinator-2"), "--database", database.url]);
    // The agent comes back by itself (its backoff), and the phone with it.
    await waitFor(`${serial} back online`, online, { timeoutMs: 20_000 });
    const leases = await farm(["lease", "list"], lab.env);
    expect(JSON.stringify(leases.json)).toContain(serial);
    const again = await farm(["shell", "--device", serial, "--", "echo", "still-leased"], asHolder);
    expect(JSON.stringify(again.json)).toContain("still-leased");
    // Someone else (no lease token) is refused: the lease itself came back, not only its listing.
    const other = await farm(["shell", "--device", serial, "--", "echo", "x"], lab.env);
    expect(other.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    const labelled = (await farm(["device", "label", "list"], lab.env)).json["devices"] as { labels: Record<string, string> }[];
    expect(labelled.map((d) => d.labels)).toEqual([{ rack: "pg1" }]);
    const activity = await farm(["activity", "--device", serial], lab.env);
    expect(JSON.stringify(activity.json)).toContain("from-pg");
    expect((await farm(["token", "list"], lab.env)).json).toMatchObject({ tokens: expect.arrayContaining([expect.objectContaining({ name: "ci-bot" })]) });
    expect((await farm(["lease", "release"], asHolder)).code).toBe(0);
  });
});
