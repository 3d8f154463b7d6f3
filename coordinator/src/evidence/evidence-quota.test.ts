import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { openPostgres } from "../db/open-postgres.js";
import { postgresDatabase, sqliteDatabase, type DatabaseDialect, type FarmDatabase } from "../db/database.js";
import { dialects } from "../db/testing/test-database.js";
import { createTestDatabase } from "../db/testing/test-postgres.js";
import { createEvidenceGrantStore } from "./evidence-grant-store.js";
import { EvidenceGrants } from "./evidence-grants.js";
import { createEvidenceIndexStore } from "./evidence-index-store.js";
import { EvidenceQuota, type Reservation } from "./evidence-quota.js";
import { QuotaReservationStore } from "./quota-reservation-store.js";

const refused = (p: Promise<unknown>): Promise<ErrorReport | null> => p.then(() => null, (err: unknown) => toErrorReport(err));
const HOLD = 60_000;

/**
 * Two handles on one database: on PostgreSQL two pools, as two replicas
 * have; SQLite is one coordinator's, so both are the same handle.
 */
async function openPair(dialect: DatabaseDialect): Promise<{ a: FarmDatabase; b: FarmDatabase; close(): Promise<void> }> {
  if (dialect === "sqlite") {
    const db = sqliteDatabase(":memory:");
    return { a: db, b: db, close: () => db.close() };
  }
  const created = await createTestDatabase();
  const a = postgresDatabase(await openPostgres(created.url, { poolSize: 6 }));
  const b = postgresDatabase(await openPostgres(created.url, { poolSize: 6 }));
  // Connections open before the test: parallel calls then meet in the database, not in connection set-up.
  await Promise.all([a, b].flatMap((d) => (d.dialect === "postgres" ? Array.from({ length: 6 }, () => d.pool.query("SELECT pg_sleep(0.05)")) : [])));
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await created.drop();
    },
  };
}

describe.each(dialects)("evidence quota reservations on %s", (dialect) => {
  let pair: Awaited<ReturnType<typeof openPair>> | undefined;
  afterEach(async () => {
    await pair?.close();
    pair = undefined;
  });

  async function setup(quotaBytes: number, capturesPerUser = 4, now?: () => number) {
    pair = await openPair(dialect);
    const { a, b } = pair;
    return {
      database: a,
      /** As one replica and another see it. */
      quotas: [new EvidenceQuota(new QuotaReservationStore(a), quotaBytes, capturesPerUser, now), new EvidenceQuota(new QuotaReservationStore(b), quotaBytes, capturesPerUser, now)] as const,
      store: new QuotaReservationStore(a),
    };
  }

  it("lets parallel reservations from two replicas take at most the quota", async () => {
    const { quotas, store } = await setup(350);
    // Ten at once, alternating replicas: three of 100 fit in 350.
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => refused(quotas[i % 2]!.reserveCapture("alice", "still", 100, HOLD))));
    expect(results.filter((r) => r === null)).toHaveLength(3);
    for (const r of results.filter((x) => x !== null)) expect(r).toMatchObject({ code: "QUOTA_EXCEEDED", field: "quota", dispatched: false });
    expect(await store.usage("alice", Date.now())).toMatchObject({ reservedBytes: 300, captures: 3 });
  });

  it("limits the captures one user has in flight, not another user's, nor session files", async () => {
    const { quotas } = await setup(10_000, 4);
    const held: Reservation[] = [];
    for (let i = 0; i < 4; i++) held.push(await quotas[i % 2]!.reserveCapture("alice", i % 2 ? "video" : "still", 10, HOLD));
    const fifth = await refused(quotas[1].reserveCapture("alice", "still", 10, HOLD));
    expect(fifth).toMatchObject({ code: "RESOURCE_EXHAUSTED", field: "captures_per_user", dispatched: false });
    expect(fifth?.message).toContain("alice");
    expect(fifth?.message).toContain("--captures-per-user");
    expect(fifth?.message).toContain("4");
    await expect(quotas[0].reserveCapture("bob", "still", 10, HOLD)).resolves.toBeDefined();
    await expect(quotas[0].reserveFiles("alice", 10)).resolves.toBeDefined();
    // One settles: the next capture fits.
    await held[0]!.release();
    await expect(quotas[1].reserveCapture("alice", "still", 10, HOLD)).resolves.toBeDefined();
  });

  it("gives back what is released, and twice released is once", async () => {
    const { quotas, store } = await setup(200);
    const first = await quotas[0].reserveCapture("alice", "still", 150, HOLD);
    expect(await refused(quotas[1].reserveCapture("alice", "still", 100, HOLD))).toMatchObject({ code: "QUOTA_EXCEEDED" });
    await first.release();
    await first.release();
    expect(await store.usage("alice", Date.now())).toMatchObject({ reservedBytes: 0, captures: 0 });
    await expect(quotas[1].reserveCapture("alice", "still", 200, HOLD)).resolves.toBeDefined();
  });

  it("stops counting a reservation at its expiry (what a crash left behind)", async () => {
    let now = 1_000_000;
    const { quotas, store } = await setup(100, 1, () => now);
    await quotas[0].reserveCapture("alice", "still", 100, 5_000);
    expect(await refused(quotas[1].reserveCapture("alice", "still", 1, HOLD))).toMatchObject({ code: "RESOURCE_EXHAUSTED" });
    now += 5_000;
    await expect(quotas[1].reserveCapture("alice", "still", 100, HOLD)).resolves.toBeDefined();
    expect(await store.usage("alice", now)).toMatchObject({ reservedBytes: 100, captures: 1 });
  });

  it("counts stored bundles and the session files kept for the user, each user's own", async () => {
    const { database, quotas, store } = await setup(1_000);
    const grants = new EvidenceGrants(createEvidenceGrantStore(database));
    const g = await grants.issue({ kind: "still", agentId: "a1", agentToken: "agent-1", serial: "s1", physicalId: "p1", requestedBy: "alice" });
    await createEvidenceIndexStore(database).insert({ evidenceId: g.evidenceId, kind: "still", status: "complete", label: null, serial: "s1", physicalId: "p1", agentId: "a1", createdAt: Date.now(), totalBytes: 600, manifestSha256: "0".repeat(64) });
    // Files are held at their size, then kept: counted once, in the user's total.
    const mine = await quotas[0].reserveFiles("alice", 300);
    expect(await store.usage("alice", Date.now())).toMatchObject({ sessionFileBytes: 0, reservedBytes: 300 });
    await mine.keep(300);
    await mine.release();
    await (await quotas[1].reserveFiles("bob", 900)).keep(900);
    expect(await store.usage("alice", Date.now())).toEqual({ evidenceBytes: 600, sessionFileBytes: 300, reservedBytes: 0, captures: 0 });
    expect(await store.usage("bob", Date.now())).toMatchObject({ evidenceBytes: 0, sessionFileBytes: 900 });
    // 600 + 300 stored: 100 more fit, 101 do not.
    const over = await refused(quotas[0].reserveFiles("alice", 101));
    expect(over).toMatchObject({ code: "QUOTA_EXCEEDED", field: "quota" });
    expect(over?.message).toContain("--evidence-quota");
    await expect(quotas[0].reserveFiles("alice", 100)).resolves.toBeDefined();
    await expect(quotas[1].reserveCapture("carol", "still", 1_000, HOLD)).resolves.toBeDefined();
  });

  it("keeps reservations apart by id", async () => {
    const { quotas, store } = await setup(1_000);
    const a = await quotas[0].reserveCapture("alice", "still", 10, HOLD);
    const b = await quotas[1].reserveCapture("alice", "video", 20, HOLD);
    expect(a.id).not.toBe(b.id);
    await quotas[0].release(randomUUID());
    await quotas[0].release(b.id);
    expect(await store.usage("alice", Date.now())).toMatchObject({ reservedBytes: 10, captures: 1 });
  });
});
