import { afterEach, describe, expect, it } from "vitest";
import { actionError, Errors, refusalReport, toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { openPostgres } from "../db/open-postgres.js";
import { postgresDatabase, sqliteDatabase, type DatabaseDialect, type FarmDatabase } from "../db/database.js";
import { dialects } from "../db/testing/test-database.js";
import { createTestDatabase } from "../db/testing/test-postgres.js";
import { Idempotency, type AnswerCodec } from "./idempotency.js";
import { IdempotencyStore } from "./idempotency-store.js";

const text: AnswerCodec<string> = { encode: (s) => s, decode: (s) => s };
const refused = (p: Promise<unknown>): Promise<ErrorReport | null> => p.then(() => null, (err: unknown) => toErrorReport(err));

/** Two handles on one database: on PostgreSQL two pools, as two replicas have; SQLite's is one coordinator's. */
async function openPair(dialect: DatabaseDialect): Promise<{ a: FarmDatabase; b: FarmDatabase; close(): Promise<void> }> {
  if (dialect === "sqlite") {
    const db = sqliteDatabase(":memory:");
    return { a: db, b: db, close: () => db.close() };
  }
  const created = await createTestDatabase();
  const a = postgresDatabase(await openPostgres(created.url, { poolSize: 4 }));
  const b = postgresDatabase(await openPostgres(created.url, { poolSize: 4 }));
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

function deferred<T>(): { promise: Promise<T>; resolve(v: T): void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe.each(dialects)("request ids on %s", (dialect) => {
  let pair: Awaited<ReturnType<typeof openPair>> | undefined;
  afterEach(async () => {
    await pair?.close();
    pair = undefined;
  });

  /** Two coordinators (owners) on the database, with one clock. */
  async function two(clock = { now: 1_000_000 }) {
    pair = await openPair(dialect);
    const now = () => clock.now;
    return {
      clock,
      a: new Idempotency(new IdempotencyStore(pair.a), { owner: "replica-a", now, retentionMs: 60_000 }),
      b: new Idempotency(new IdempotencyStore(pair.b), { owner: "replica-b", now, retentionMs: 60_000 }),
      store: new IdempotencyStore(pair.a),
    };
  }

  it("answers a repeat through the other coordinator, or a new one after a restart, with the first answer", async () => {
    const { a, b } = await two();
    let runs = 0;
    const call = async () => `answer-${++runs}`;
    expect(await a.run("ci", "r-1", "fp", text, call)).toBe("answer-1");
    expect(await b.run("ci", "r-1", "fp", text, call)).toBe("answer-1");
    const restarted = new Idempotency(new IdempotencyStore(pair?.a as FarmDatabase), { owner: "replica-a-again", now: () => 1_000_000 });
    expect(await restarted.run("ci", "r-1", "fp", text, call)).toBe("answer-1");
    expect(runs).toBe(1);
    // Keys are per caller.
    expect(await b.run("other", "r-1", "fp", text, call)).toBe("answer-2");
  });

  it("refuses a different request under the same id before running it, on either coordinator", async () => {
    const { a, b } = await two();
    let runs = 0;
    const call = async () => `answer-${++runs}`;
    await a.run("ci", "r-1", "shell:ls", text, call);
    const conflict = refusalReport("IDEMPOTENCY_CONFLICT", "request id r-1 was used for a different request", "target.request_id");
    expect(await refused(a.run("ci", "r-1", "shell:reboot", text, call))).toEqual(conflict);
    expect(await refused(b.run("ci", "r-1", "shell:reboot", text, call))).toEqual(conflict);
    expect(runs).toBe(1);
  });

  it("repeats the first call's error, its outcome included, through the other coordinator", async () => {
    const { a, b } = await two();
    let runs = 0;
    const call = async (): Promise<string> => {
      runs++;
      throw actionError(Errors.COMMAND_TIMEOUT, "the command ran out of time", { dispatched: true, ambiguous: true, actionId: "act-1", agentId: "agent-1" }, "timeout");
    };
    const first = await refused(a.run("ci", "r-2", "fp", text, call));
    expect(first).toMatchObject({ code: "COMMAND_TIMEOUT", dispatched: true, ambiguous: true, actionId: "act-1", agentId: "agent-1", field: "timeout" });
    expect(await refused(b.run("ci", "r-2", "fp", text, call))).toEqual(first);
    expect(runs).toBe(1);
  });

  it("waits for a first call running in this process; through another, says the outcome is unknown and runs nothing", async () => {
    const { a, b } = await two();
    const gate = deferred<string>();
    let runs = 0;
    const call = () => {
      runs++;
      return gate.promise;
    };
    const first = a.run("ci", "r-3", "fp", text, call);
    const repeatHere = a.run("ci", "r-3", "fp", text, call);
    // The other coordinator sees the claim only once it is stored: wait for the row, not a margin.
    const store = new IdempotencyStore(pair?.b as FarmDatabase);
    while (!(await store.read("ci", "r-3", 1_000_000))) await new Promise((r) => setImmediate(r));
    const elsewhere = await refused(b.run("ci", "r-3", "fp", text, call));
    expect(elsewhere).toMatchObject({ ok: false, code: "IDEMPOTENCY_PENDING", field: "target.request_id", dispatched: null, ambiguous: true });
    expect(elsewhere?.message).toContain("another coordinator");
    gate.resolve("done-once");
    expect(await first).toBe("done-once");
    expect(await repeatHere).toBe("done-once");
    expect(await b.run("ci", "r-3", "fp", text, call)).toBe("done-once");
    expect(runs).toBe(1);
  });

  it("a first call that a stopped coordinator never finished stays unknown after a restart", async () => {
    const { store } = await two();
    expect(await store.claim({ caller: "ci", requestId: "r-4", fingerprint: "fp", owner: "killed" }, 1_000_000, 1_060_000)).toBe(true);
    const restarted = new Idempotency(new IdempotencyStore(pair?.a as FarmDatabase), { owner: "new", now: () => 1_000_500 });
    let runs = 0;
    const report = await refused(restarted.run("ci", "r-4", "fp", text, async () => `ran-${++runs}`));
    expect(report).toMatchObject({ code: "IDEMPOTENCY_PENDING", dispatched: null, ambiguous: true });
    expect(runs).toBe(0);
  });

  it("lets exactly one of many concurrent first calls through two coordinators run", async () => {
    const { a, b } = await two();
    let runs = 0;
    const call = async () => `answer-${++runs}`;
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).run("ci", "r-5", "fp", text, call)));
    expect(runs).toBe(1);
    for (const r of results) {
      if (r.status === "fulfilled") expect(r.value).toBe("answer-1");
      else expect(toErrorReport(r.reason)).toMatchObject({ code: "IDEMPOTENCY_PENDING" });
    }
    expect(await b.run("ci", "r-5", "fp", text, call)).toBe("answer-1");
  });

  it("forgets a key after its retention: the id may be used again, and the sweep deletes expired keys in batches", async () => {
    const { a, clock, store } = await two();
    let runs = 0;
    const call = async () => `answer-${++runs}`;
    for (let i = 0; i < 7; i++) await a.run("ci", `old-${i}`, "fp", text, call);
    clock.now += 60_000;
    // Expired but not yet swept: claimed again, with other content too.
    expect(await a.run("ci", "old-0", "other", text, call)).toBe("answer-8");
    expect(await store.sweep(clock.now, 4)).toBe(4);
    expect(await a.sweep(4)).toBe(2);
    expect(await store.read("ci", "old-1", clock.now)).toBeUndefined();
    expect(await store.read("ci", "old-0", clock.now)).toMatchObject({ state: "done", answer: "answer-8" });
  });
});
