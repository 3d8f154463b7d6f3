/**
 * A replica killed (SIGKILL) while 200 callers acquire leases through three
 * replicas on one PostgreSQL database: no grant a caller received is lost,
 * no phone is ever held by two callers, and the database shows each grant
 * once (checked afterwards).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { waitFor, type FarmProcess } from "../support/farm-process.js";
import { startReplicaLeaseLab, type ReplicaLeaseLab } from "../support/replica-lease-lab.js";

const any = { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };
const CALLERS = 200;
const VICTIM = 2;

let lab: ReplicaLeaseLab;
let database: ReplicaLeaseLab["database"];
let replicas: FarmProcess[];
let leases: Client<typeof LeaseService>[];

beforeAll(async () => {
  lab = await startReplicaLeaseLab("replica-lease-kill");
  ({ database, replicas, leases } = lab);
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

const codeOf = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";

/** The victim went away under the call (its connection, not a refusal of the request). */
const lostReplica = (err: unknown) => [Code.Unavailable, Code.Aborted, Code.Unknown, Code.Internal, Code.Canceled, Code.DeadlineExceeded].includes(ConnectError.from(err).code);

describe("a replica killed during concurrent grants", () => {
  it("loses no grant a caller received and grants no phone twice; the database agrees", async () => {
    /** Which caller holds each phone now, by what the callers were told. */
    const holding = new Map<string, number>();
    const doubles: string[] = [];
    const received = new Map<number, { leaseId: string; physicalId: string }>();
    let failedOnVictim = 0;
    let killed = false;

    const caller = async (i: number) => {
      const ticket = `k-${String(i).padStart(3, "0")}`;
      let via = i % 3;
      for (;;) {
        try {
          const res = await leases[via]!.acquireLease({ selector: any, waitMs: 120_000, ttlMs: 20_000, ticket }, { timeoutMs: 150_000 });
          const phone = res.lease?.physicalId ?? "";
          const other = holding.get(phone);
          if (other !== undefined) doubles.push(`${phone}: callers ${other} and ${i}`);
          holding.set(phone, i);
          received.set(i, { leaseId: res.lease?.leaseId ?? "", physicalId: phone });
          await new Promise((r) => setTimeout(r, 2));
          // Given up before it is released: another caller may be told of the phone only after.
          holding.delete(phone);
          let back = (i + 1) % 3;
          for (;;) {
            try {
              await leases[back]!.releaseLease({ token: res.token });
              return;
            } catch (err) {
              // Asked again after the victim died under it: it may have committed the release first.
              if (back !== (i + 1) % 3 && codeOf(err) === "LEASE_RELEASED") return;
              if (!(killed && back === VICTIM && lostReplica(err))) throw err;
              back = 0;
            }
          }
        } catch (err) {
          if (!(via === VICTIM && lostReplica(err))) throw err;
          // Asked again, with the same ticket, through a replica that is up.
          failedOnVictim++;
          via = 0;
          await waitFor("the victim is down", async () => (killed ? true : undefined));
        }
      }
    };
    const calls = Array.from({ length: CALLERS }, (_, i) => caller(i));
    for (const c of calls) c.catch(() => undefined);
    await waitFor("30 grants received", async () => (received.size >= 30 ? true : undefined), { timeoutMs: 120_000 });
    replicas[VICTIM]!.kill("SIGKILL");
    killed = true;
    await Promise.all(calls);

    expect(doubles).toEqual([]);
    expect(received.size).toBe(CALLERS);
    expect(failedOnVictim).toBeGreaterThan(0);

    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const rows = (await client.query<{ lease_id: string; physical_id: string; state: string }>("SELECT lease_id, physical_id, state FROM leases")).rows;
      const stored = new Map(rows.map((r) => [r.lease_id, r]));
      // Every grant a caller received is stored, on the phone it was told, and ended (each was released).
      for (const [i, got] of received) expect(stored.get(got.leaseId), `caller ${i}`).toMatchObject({ physical_id: got.physicalId, state: "released" });
      // Each grant once: no lease id handed to two callers.
      expect(new Set([...received.values()].map((g) => g.leaseId)).size).toBe(CALLERS);
      // Grants nobody received: only those the victim committed as it died (at most one per call cut there).
      expect(rows.length - CALLERS).toBeLessThanOrEqual(failedOnVictim);
      // At most one active lease per phone.
      const active = rows.filter((r) => r.state === "active").map((r) => r.physical_id);
      expect(new Set(active).size).toBe(active.length);
    } finally {
      await client.end();
    }
  }, 300_000);
});
