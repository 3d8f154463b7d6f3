import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { toErrorReport } from "@farm/shared/errors";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { createLogger } from "@farm/shared/log";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { DeviceLabels } from "../devices/device-labels.js";
import { Registry } from "../registry/registry.js";
import { SqliteRegistryStore } from "../registry/sqlite-registry-store.js";
import { LeaseManager, type Grant } from "./lease-manager.js";
import type { Selector } from "./selector.js";
import { SqliteLeaseStore } from "./sqlite-lease-store.js";
import { sqliteDatabaseOf } from "../db/database.js";
import { createDeviceLabelStore } from "../db/stores.js";

let now = 1_700_000_000_000;
let opened: OpenedDatabase | undefined;
const managers: LeaseManager[] = [];
const calls: AbortController[] = [];

afterEach(() => {
  for (const c of calls) c.abort();
  for (const m of managers) m.abandonCalls(new Error("test over"));
  managers.length = 0;
  calls.length = 0;
  opened?.close();
  opened = undefined;
});

/** One agent reporting phones pd-1..pd-5 (serials S-1..S-5). */
async function start(): Promise<LeaseManager> {
  opened = openDatabase(":memory:");
  const registry = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3, now: () => now });
  const labels = await DeviceLabels.open(createDeviceLabelStore(sqliteDatabaseOf(opened.db)));
  const leases = await LeaseManager.open(new SqliteLeaseStore(opened.db), registry, labels, createLogger({ level: "error" }), () => now);
  registry.events.on("change", () => leases.kick(leases.dispatch()));
  managers.push(leases);
  await registry.attach(create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 }), { terminate: () => undefined });
  await registry.replaceInventory(
    "a-1",
    [1, 2, 3, 4, 5].map((i) => create(DeviceReportSchema, { serial: `S-${i}`, state: "device", properties: { physicalId: `pd-${i}`, identityStatus: "ok", model: "Pixel 7" } })),
  );
  return leases;
}

const sel = (physicalId: string): Selector => ({ serial: "", physicalId, labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" });

/** Acquires at the current fake time; resolves once granted. */
function acquire(leases: LeaseManager, holder: string, physicalId: string, waitMs = 0): Promise<Grant> {
  const controller = new AbortController();
  calls.push(controller);
  return leases.acquire(holder, sel(physicalId), { waitMs, ttlMs: 60_000, ticket: `t-${holder}`, signal: controller.signal });
}

function refusal(f: () => unknown) {
  try {
    f();
    return null;
  } catch (err) {
    return toErrorReport(err);
  }
}

describe("LeaseManager: paged listing", () => {
  it("pages leases oldest first, with the whole queue on the first page only", async () => {
    const leases = await start();
    const granted: Grant[] = [];
    // Two at the same time: the lease id orders them.
    granted.push(await acquire(leases, "h3", "pd-3"), await acquire(leases, "h1", "pd-1"));
    now += 1;
    granted.push(await acquire(leases, "h5", "pd-5"));
    now += 1;
    granted.push(await acquire(leases, "h2", "pd-2"));
    const waiting = acquire(leases, "w", "pd-1", 60_000);
    waiting.catch(() => undefined);
    // Queued once its place is stored.
    await new Promise((r) => setImmediate(r));
    const [t0a, t0b] = [granted[0], granted[1]].map((g) => g!.lease).sort((a, b) => (a.leaseId < b.leaseId ? -1 : 1));
    const expected = [t0a!.physicalId, t0b!.physicalId, "pd-5", "pd-2"];

    const first = leases.listPage({ pageSize: 3, pageToken: "" });
    expect(first.leases.items.map((l) => l.physicalId)).toEqual(expected.slice(0, 3));
    expect(first.queue.map((w) => w.holder)).toEqual(["w"]);
    const second = leases.listPage({ pageSize: 3, pageToken: first.leases.nextPageToken });
    expect(second.leases.items.map((l) => l.physicalId)).toEqual(["pd-2"]);
    expect(second.leases.nextPageToken).toBe("");
    // Read to the end, the queue is there once.
    expect(second.queue).toEqual([]);
    // Page size 0 is the default, far more than four.
    expect(leases.listPage({ pageSize: 0, pageToken: "" }).leases.items).toHaveLength(4);
  });

  it("neither repeats nor misses a lease when leases are released, renewed and granted between pages", async () => {
    const leases = await start();
    const grants: Grant[] = [];
    for (const i of [1, 2, 3, 4]) {
      now += 1;
      grants.push(await acquire(leases, `h${i}`, `pd-${i}`));
    }
    const first = leases.listPage({ pageSize: 2, pageToken: "" });
    expect(first.leases.items.map((l) => l.physicalId)).toEqual(["pd-1", "pd-2"]);
    // The lease the next page starts after ends, one ahead is renewed (its place does not move), a new one is granted.
    await leases.release(grants[1]!.token);
    now += 10;
    await leases.renew(grants[2]!.token, 120_000);
    await acquire(leases, "h5", "pd-5");
    const second = leases.listPage({ pageSize: 2, pageToken: first.leases.nextPageToken });
    expect(second.leases.items.map((l) => l.physicalId)).toEqual(["pd-3", "pd-4"]);
    const third = leases.listPage({ pageSize: 2, pageToken: second.leases.nextPageToken });
    expect(third.leases.items.map((l) => l.physicalId)).toEqual(["pd-5"]);
    expect(third.leases.nextPageToken).toBe("");
  });

  it("refuses a negative page size, and a token that is not a leases token", async () => {
    const leases = await start();
    await acquire(leases, "h1", "pd-1");
    await acquire(leases, "h2", "pd-2");
    expect(refusal(() => leases.listPage({ pageSize: -1, pageToken: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
    expect(refusal(() => leases.listPage({ pageSize: 1, pageToken: "not-ours" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    await leases.setLabels("S-1", { rack: "a" });
    await leases.setLabels("S-2", { rack: "b" });
    const labelsToken = leases.labelsPage({ pageSize: 1, pageToken: "" }).nextPageToken;
    expect(labelsToken).not.toBe("");
    expect(refusal(() => leases.listPage({ pageSize: 1, pageToken: labelsToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
  });
});
