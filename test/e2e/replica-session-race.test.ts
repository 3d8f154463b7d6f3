/**
 * A session's start through one replica racing its lease's release through
 * another, through real replica processes on PostgreSQL (the store's unit
 * tests, coordinator/src/sessions/session-lease-race.test.ts, cover the
 * statements alone). The race is made deterministic by the database: this
 * test holds the lease's row (FOR UPDATE) while both calls arrive, sees each
 * one's statement wait for that lock (pg_stat_activity), and lets go; the
 * lock queue then decides which statement runs first. Whatever the order,
 * no session may keep running under a lease that ended.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { SessionService, SessionStatus } from "@farm/shared/gen/farm/v1/session_service_pb";
import { waitFor } from "../support/farm-process.js";
import { startReplicaLeaseLab, type ReplicaLeaseLab } from "../support/replica-lease-lab.js";

const any = { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };

let lab: ReplicaLeaseLab;
let db: pg.Client;
let observer: pg.Client;

beforeAll(async () => {
  lab = await startReplicaLeaseLab("replica-session-race");
  const open = async () => {
    const c = new pg.Client({ connectionString: lab.database.url });
    await c.connect();
    return c;
  };
  // One client holds the row in a transaction; the other watches (a transaction keeps its first view of pg_stat_activity).
  [db, observer] = await Promise.all([open(), open()]);
}, 120_000);

afterAll(async () => {
  await db?.end().catch(() => undefined);
  await observer?.end().catch(() => undefined);
  await lab?.stop();
});

/** Sessions on a replica, as the admin, under a lease token. */
function sessionsOn(replica: number, lease: string): Client<typeof SessionService> {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${lab.admin}`);
    req.header.set("x-farm-lease", lease);
    return next(req);
  };
  return createClient(SessionService, createGrpcTransport({ baseUrl: String(lab.replicas[replica]!.ready["url"]), interceptors: [auth] }));
}

/** The replicas' statements now waiting for a lock whose text contains `fragment`. */
async function waitingStatements(fragment: string): Promise<number> {
  const r = await observer.query<{ n: string }>(
    "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND position($1 in query) > 0",
    [fragment],
  );
  return Number(r.rows[0]!.n);
}

/** The stable code and field of a refused call. */
function refusal(err: unknown): { code: string; field: string } {
  const d = ConnectError.from(err).findDetails(ErrorDetailSchema)[0];
  return { code: d?.code ?? "", field: d?.field ?? "" };
}

// Fragments of the two statements as pg-lease-store.ts and kysely-session-store.ts send them.
const RELEASE_STATEMENT = "UPDATE leases SET state = 'released'";
const START_STATEMENT = "INSERT INTO sessions";

describe("a session started through replica A while its lease is released through replica B", () => {
  it.each(
    [
      { first: "release", then: "start" },
      { first: "start", then: "release" },
    ] as const,
  )("the $first reaches the lease's row first, $then waits behind it: no session runs under the released lease", async ({ first }) => {
    const granted = await lab.leases[2]!.acquireLease({ selector: any, waitMs: 0, ttlMs: 120_000 });
    const lease = granted.lease!;
    const sessions = sessionsOn(0, granted.token);

    // Hold the lease's row: both statements will queue for it, in the order they arrive.
    await db.query("BEGIN");
    await db.query("SELECT 1 FROM leases WHERE lease_id = $1 FOR UPDATE", [lease.leaseId]);
    let released: Promise<unknown> | undefined;
    let started: Promise<Awaited<ReturnType<typeof sessions.startSession>>> | undefined;
    // Each call's statement is seen waiting for the row (or the call has already answered: a start that
    // did not check the lease in its statement would not wait, and the checks below say what it left).
    const settled = (p: Promise<unknown>) => {
      let done = false;
      p.then(() => (done = true), () => (done = true));
      return () => done;
    };
    const release = async () => {
      released = lab.leases[1]!.releaseLease({ token: granted.token });
      const done = settled(released);
      await waitFor("the release through B waits for the lease's row", async () => (done() || (await waitingStatements(RELEASE_STATEMENT)) === 1 ? true : undefined), { timeoutMs: 30_000 });
    };
    const start = async () => {
      started = sessions.startSession({ target: { serial: lease.serial }, name: `race-${first}-first` });
      const done = settled(started);
      await waitFor("the start through A waits for the lease's row", async () => (done() || (await waitingStatements(START_STATEMENT)) === 1 ? true : undefined), { timeoutMs: 30_000 });
    };
    try {
      if (first === "release") {
        await release();
        await start();
      } else {
        await start();
        await release();
      }
    } finally {
      await db.query("ROLLBACK");
    }

    // The release succeeds either way.
    await expect(released).resolves.toBeDefined();
    const outcome = await (started as NonNullable<typeof started>).then(
      (res) => ({ session: res.session! }),
      (err: unknown) => ({ refused: refusal(err) }),
    );
    if (first === "release") {
      // The release ended the lease before the start's statement ran: nothing stored.
      expect(outcome).toEqual({ refused: { code: "LEASE_RELEASED", field: "lease" } });
    } else {
      // The start stored its session first; the release, waiting behind it, saw it and ends it.
      expect(outcome).toMatchObject({ session: { status: SessionStatus.RUNNING, leaseId: lease.leaseId } });
      const id = (outcome as { session: { sessionId: string } }).session.sessionId;
      // Ended asynchronously by B, the replica that ended the lease; read through A.
      const ended = await waitFor("the session ended by the release", async () => {
        const s = (await sessions.getSession({ sessionId: id })).session;
        return s?.status === SessionStatus.RUNNING ? undefined : s;
      }, { timeoutMs: 30_000 });
      expect(ended.status).toBe(SessionStatus.LEASE_ENDED);
    }
    // Whatever the order: in the database, no running session under this lease, now ended.
    const orphans = await observer.query(
      "SELECT s.session_id FROM sessions s JOIN leases l ON l.lease_id = s.lease_id WHERE s.status = 'running' AND l.state <> 'active' AND l.lease_id = $1",
      [lease.leaseId],
    );
    expect(orphans.rows).toEqual([]);
    expect((await observer.query("SELECT state FROM leases WHERE lease_id = $1", [lease.leaseId])).rows).toEqual([{ state: "released" }]);
  }, 120_000);
});
