import { ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "../db/database.js";
import { createLeaseStore, createSessionStore } from "../db/stores.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import type { LeaseRow } from "../leases/lease-store.js";
import { Sessions } from "./sessions.js";
import { activeLease, runningSession } from "../leases/testing/lease-fixtures.js";

let opened: FarmDatabase | undefined;
const clients: pg.Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.end().catch(() => undefined);
  await opened?.close();
  opened = undefined;
});

const lease = (leaseId: string, physicalId: string) => activeLease(leaseId, physicalId, "alice");
const under = (l: LeaseRow) => ({ leaseId: l.leaseId, physicalId: l.physicalId, agentId: l.agentId, serial: l.serial });
const start = { name: "run", context: {}, ocr: false };

async function errorOf(p: Promise<unknown>): Promise<{ code: string; field: string }> {
  try {
    await p;
  } catch (err) {
    const d = ConnectError.from(err).findDetails(ErrorDetailSchema)[0];
    return { code: d?.code ?? "", field: d?.field ?? "" };
  }
  throw new Error("did not throw");
}

describe.each(dialects)("a session's start against its lease's end, on %s", (dialect) => {
  it("stores a session only while its lease is active in the database, whatever was checked before", async () => {
    opened = await openTestDatabase(dialect);
    const leases = createLeaseStore(opened);
    const store = createSessionStore(opened);
    const sessions = new Sessions(store, () => 100, { underLiveLease: true });
    await leases.insertLease(lease("l-1", "pd-1"));
    const first = await sessions.start("alice", under(lease("l-1", "pd-1")), start);
    expect(await store.running("l-1")).toEqual([first]);
    // The lease ends (through another replica, say) after the caller's lease check and before the insert.
    await leases.endLease("l-1", "released", 5);
    expect(await errorOf(sessions.start("alice", under(lease("l-1", "pd-1")), start))).toEqual({ code: "LEASE_RELEASED", field: "lease" });
    await leases.insertLease(lease("l-2", "pd-2"));
    await leases.endLease("l-2", "expired", 6);
    expect(await errorOf(sessions.start("alice", under(lease("l-2", "pd-2")), start))).toEqual({ code: "LEASE_EXPIRED", field: "lease" });
    expect(await errorOf(sessions.start("alice", under(lease("l-nope", "pd-3")), start))).toEqual({ code: "LEASE_NOT_FOUND", field: "lease" });
    // Nothing was stored for the refused starts.
    expect((await store.running()).map((s) => s.sessionId)).toEqual([first.sessionId]);
  });
});

describe("a session's start against its lease's release, on PostgreSQL", () => {
  const session = (sessionId: string, leaseId: string) => runningSession(sessionId, leaseId, "alice");

  /**
   * A client of its own on the test database, and how many statements on it wait for a lock (asked on
   * another client: one inside a transaction keeps its first view of pg_stat_activity).
   */
  async function side(db: FarmDatabase): Promise<{ c: pg.Client; waiting: () => Promise<number> }> {
    if (db.dialect !== "postgres") throw new Error("PostgreSQL only");
    const open = async () => {
      const c = new pg.Client({ connectionString: (db.pool.options as { connectionString: string }).connectionString });
      await c.connect();
      clients.push(c);
      return c;
    };
    const [c, observer] = await Promise.all([open(), open()]);
    const waiting = async () => Number((await observer.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).rows[0].n);
    return { c, waiting };
  }

  async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
    // Waits on the database's own state (a statement blocked on a lock), not on time.
    for (let i = 0; !(await ok()); i++) {
      if (i > 2000) throw new Error(`never: ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  it("a release that comes while a start holds the lease waits for it and reports its session", async () => {
    opened = await openTestDatabase("postgres");
    const leases = createLeaseStore(opened);
    const store = createSessionStore(opened);
    await leases.insertLease(lease("l-1", "pd-1"));
    const { c: blocker, waiting } = await side(opened);
    // Holds the new session's id, uncommitted: the start's insert waits at the unique index, after its
    // statement has marked (and so locked) the lease row.
    await blocker.query("BEGIN");
    await blocker.query("INSERT INTO sessions (session_id, name, physical_id, serial, agent_id, lease_id, owner, status, created_at, context, ocr) VALUES ('s-1', 'x', 'pd-1', 'S-1', 'a-1', 'l-other', 'bob', 'passed', 1, '{}', false)");
    const started = store.insertUnderLease(session("s-1", "l-1"));
    await until("the start waits for the held id", async () => (await waiting()) === 1);
    let releaseDone = false;

    const released = leases.releaseByTokenHash("hash-l-1", 7).finally(() => (releaseDone = true));
    // The release waits for the start's lock on the lease row (before this fix it did not, and missed the session).
    await until("the release waits too (or has ended)", async () => releaseDone || (await waiting()) === 2);
    await blocker.query("ROLLBACK");
    expect(await started).toBe("stored");
    expect(await released).toMatchObject({ leaseId: "l-1", state: "released", runningSessions: true });
  });

  it("a start that comes while a release holds the lease waits for it and stores nothing", async () => {
    opened = await openTestDatabase("postgres");
    const leases = createLeaseStore(opened);
    const store = createSessionStore(opened);
    await leases.insertLease(lease("l-1", "pd-1"));
    const { c: releaser, waiting } = await side(opened);
    // The release's statement has run, its commit not yet.
    await releaser.query("BEGIN");
    await releaser.query("UPDATE leases SET state = 'released', ended_at = 7 WHERE lease_id = 'l-1'");
    const started = store.insertUnderLease(session("s-1", "l-1"));
    await until("the start waits for the release", async () => (await waiting()) === 1);
    await releaser.query("COMMIT");
    expect(await started).toBe("released");
    expect(await store.get("s-1")).toBeUndefined();
  });
});
