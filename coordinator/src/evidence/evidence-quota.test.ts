import { createHash, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { AgentEvidenceService, UploadEvidenceRequestSchema, UploadEvidenceStartSchema, type UploadEvidenceRequest } from "@farm/shared/gen/farm/v1/agent_evidence_service_pb";
import { EvidenceFileHeaderSchema } from "@farm/shared/gen/farm/v1/evidence_pb";
import { principalKey } from "../auth/auth.js";
import { bundleMaxBytes } from "../http/message-limits.js";
import { openPostgres } from "../db/open-postgres.js";
import { postgresDatabase, sqliteDatabase, type DatabaseDialect, type FarmDatabase } from "../db/database.js";
import { dialects } from "../db/testing/test-database.js";
import { createTestDatabase } from "../db/testing/test-postgres.js";
import { EvidenceGrants } from "./evidence-grants.js";
import { EvidenceStore } from "./evidence-store.js";
import { registerAgentEvidenceService } from "./agent-evidence-service.js";
import { EvidenceQuota, type Reservation } from "./evidence-quota.js";
import { QuotaReservationStore } from "./quota-reservation-store.js";
import { stillManifest } from "./testing/still-manifest.js";
import { createEvidenceGrantStore, createEvidenceIndexStore } from "../db/stores.js";

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
    const { quotas, store } = await setup(350, 10);
    // Ten at once, alternating replicas: three hold 100 each, a fourth the 50 left, the rest nothing.
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => quotas[i % 2]!.reserveCapture("alice", "still", 100, HOLD).then((r) => r.bytes, (err: unknown) => toErrorReport(err))));
    expect(results.filter((r) => typeof r === "number").sort()).toEqual([100, 100, 100, 50]);
    for (const r of results.filter((x) => typeof x !== "number")) expect(r).toMatchObject({ code: "QUOTA_EXCEEDED", field: "quota", dispatched: false });
    expect(await store.usage("alice", Date.now())).toMatchObject({ reservedBytes: 350, captures: 4 });
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
    const first = await quotas[0].reserveCapture("alice", "still", 200, HOLD);
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
    await createEvidenceIndexStore(database).insert({
      evidenceId: g.evidenceId,
      kind: "still",
      status: "complete",
      label: null,
      serial: "s1",
      physicalId: "p1",
      agentId: "a1",
      createdAt: Date.now(),
      totalBytes: 600,
      manifestSha256: "0".repeat(64),
    });
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

  it("lets a capture under a 600K quota hold the 600K left, not its bundle's 100 MiB; the next finds nothing left", async () => {
    const QUOTA = 600 * 1024;
    const { quotas, store } = await setup(QUOTA);
    const first = await quotas[0].reserveCapture("alice", "still", 100 * 1024 ** 2, HOLD);
    expect(first.bytes).toBe(QUOTA);
    expect(await quotas[1].held(first.id)).toBe(QUOTA);
    expect(await store.usage("alice", Date.now())).toMatchObject({ reservedBytes: QUOTA, captures: 1 });
    for (const kind of ["still", "video"] as const) {
      const next = await refused(quotas[1].reserveCapture("alice", kind, 100 * 1024 ** 2, HOLD));
      expect(next).toMatchObject({ code: "QUOTA_EXCEEDED", field: "quota", dispatched: false });
      expect(next?.message).toContain("alice");
      expect(next?.message).toContain(`${QUOTA} bytes reserved`);
      expect(next?.message).toContain("--evidence-quota");
    }
    await first.release();
    expect(await quotas[1].held(first.id)).toBeUndefined();
    // Session files stay exact: all of what they need, or nothing.
    const files = await quotas[0].reserveFiles("alice", 100 * 1024);
    expect(files.bytes).toBe(100 * 1024);
    const capture = await quotas[1].reserveCapture("alice", "video", 2 * 1024 ** 3, HOLD);
    expect(capture.bytes).toBe(500 * 1024);
    expect(await refused(quotas[0].reserveFiles("alice", 1))).toMatchObject({ code: "QUOTA_EXCEEDED", field: "quota" });
    await capture.release();
    expect(await refused(quotas[0].reserveFiles("alice", 500 * 1024 + 1))).toMatchObject({ code: "QUOTA_EXCEEDED", field: "quota" });
    expect((await quotas[0].reserveFiles("alice", 500 * 1024)).bytes).toBe(500 * 1024);
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

const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

describe.each(dialects)("a bundle's upload against its capture's reservation on %s", (dialect) => {
  let pair: Awaited<ReturnType<typeof openPair>> | undefined;
  let dataDir: string | undefined;
  afterEach(async () => {
    await pair?.close();
    pair = undefined;
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  async function setup(quotaBytes: number) {
    pair = await openPair(dialect);
    const database = pair.a;
    dataDir = await mkdtemp(join(tmpdir(), "farm-quota-upload-"));
    const store = new EvidenceStore(createEvidenceIndexStore(database), dataDir);
    await store.init();
    const grants = new EvidenceGrants(createEvidenceGrantStore(database));
    const quota = new EvidenceQuota(new QuotaReservationStore(database), quotaBytes);
    const transport = createRouterTransport((router) => registerAgentEvidenceService(router, { store, grants, quota, log: createLogger({ level: "error" }) }), {
      router: {
        interceptors: [
          (next) => (req) => {
            req.contextValues.set(principalKey, { tokenName: "agent-1", kind: "agent", role: null, admin: false });
            return next(req);
          },
        ],
      },
    });
    const client = createClient(AgentEvidenceService, transport);
    /** A capture as the coordinator starts one: its reservation, then its grant under the reservation's id. */
    const capture = async () => {
      const r = await quota.reserveCapture("alice", "still", bundleMaxBytes("still"), HOLD);
      await grants.issue({ kind: "still", agentId: "a1", agentToken: "agent-1", serial: "s1", physicalId: "p1", requestedBy: "alice" }, r.id);
      return r;
    };
    return { store, quota, client, capture };
  }

  const msg = (kind: UploadEvidenceRequest["kind"]) => create(UploadEvidenceRequestSchema, { kind });
  const start = (evidenceId: string) => msg({ case: "start", value: create(UploadEvidenceStartSchema, { evidenceId, agentId: "a1", serial: "s1", physicalId: "p1", kind: "still" }) });

  /** A whole upload of one screenshot of `png`. */
  async function* bundle(evidenceId: string, png: Buffer): AsyncGenerator<UploadEvidenceRequest> {
    yield start(evidenceId);
    yield msg({ case: "file", value: create(EvidenceFileHeaderSchema, { path: "screen.png", size: BigInt(png.length), sha256: sha256(png) }) });
    yield msg({ case: "chunk", value: png });
    yield msg({ case: "manifestJson", value: stillManifest(evidenceId, png, null) });
  }

  it("refuses a bundle larger than what was left of the quota when its capture started, before its bytes", async () => {
    const QUOTA = 1000;
    const { store, client, capture } = await setup(QUOTA);
    const held = await capture();
    expect(held.bytes).toBe(QUOTA);
    // The header alone: no byte follows it until the stream is refused.
    let sentBytes = false;
    const never = new Promise<never>(() => undefined);
    async function* oversized(): AsyncGenerator<UploadEvidenceRequest> {
      yield start(held.id);
      yield msg({ case: "file", value: create(EvidenceFileHeaderSchema, { path: "screen.png", size: BigInt(QUOTA + 1), sha256: sha256("x") }) });
      await never;
      sentBytes = true;
    }
    const over = await refused(client.uploadEvidence(oversized()));
    expect(over).toMatchObject({ code: "QUOTA_EXCEEDED", field: "quota" });
    expect(over?.message).toContain("alice");
    expect(over?.message).toContain(`${QUOTA} bytes`);
    expect(over?.message).toContain("--evidence-quota");
    expect(sentBytes).toBe(false);
    expect(await store.get(held.id)).toBeUndefined();
    // What fits its reservation is stored, and the reservation settles with it.
    const stored = await client.uploadEvidence(bundle(held.id, Buffer.alloc(QUOTA, 1)));
    expect(Number(stored.totalBytes)).toBe(QUOTA);
  });

  it("caps a bundle whose reservation is gone by its kind's largest size only", async () => {
    const { client, capture, quota } = await setup(1000);
    const held = await capture();
    await held.release();
    expect(await quota.held(held.id)).toBeUndefined();
    const stored = await client.uploadEvidence(bundle(held.id, Buffer.alloc(5000, 1)));
    expect(Number(stored.totalBytes)).toBe(5000);
  });
});
