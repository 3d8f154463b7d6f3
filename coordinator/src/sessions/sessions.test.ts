import { afterEach, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { Sessions } from "./sessions.js";
import type { SessionRow } from "./session-store.js";
import { SqliteSessionStore } from "./sqlite-session-store.js";

// A fake clock: time moves only when a test says so.
let now = 1_700_000_000_000;
const clock = () => now;
let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

function setup() {
  opened = openDatabase(":memory:");
  const store = new SqliteSessionStore(opened.db);
  const sessions = new Sessions(store, clock);
  const seen: SessionRow[] = [];
  sessions.events.on("session", (r) => seen.push({ ...r }));
  return { store, sessions, seen };
}

function errorOf(fn: () => unknown): { code: string; field: string } {
  try {
    fn();
  } catch (err) {
    const d = ConnectError.from(err).findDetails(ErrorDetailSchema)[0];
    return { code: d?.code ?? "", field: d?.field ?? "" };
  }
  throw new Error("did not throw");
}

const lease = (leaseId = "l-1", physicalId = "pd-1") => ({ leaseId, physicalId, agentId: "a-1", serial: "S-1" });
const opts = { name: "smoke", context: { build: "1.2.3" }, ocr: true };

describe("Sessions", () => {
  it("stores a started session before telling anyone, and reads it back", () => {
    const { sessions, store, seen } = setup();
    const s = sessions.start("alice", lease(), opts);
    expect(store.get(s.sessionId)).toEqual({ ...s, status: "running", endedAt: null, stepCount: 0, owner: "alice", context: { build: "1.2.3" }, ocr: true, createdAt: now });
    expect(seen.map((r) => r.status)).toEqual(["running"]);
    expect(sessions.get(s.sessionId).name).toBe("smoke");
  });

  it("refuses a name or context that is too large, naming the field", () => {
    const { sessions } = setup();
    expect(errorOf(() => sessions.start("alice", lease(), { ...opts, name: "x".repeat(201) }))).toEqual({ code: "INVALID_ARGUMENT", field: "name" });
    expect(errorOf(() => sessions.start("alice", lease(), { ...opts, context: { big: "x".repeat(17_000) } }))).toEqual({ code: "INVALID_ARGUMENT", field: "context" });
  });

  it("is ended once, by its owner or an admin only", () => {
    const { sessions, seen } = setup();
    const s = sessions.start("alice", lease(), opts);
    expect(errorOf(() => sessions.end(s.sessionId, "passed", { tokenName: "bob", admin: false }))).toEqual({ code: "PERMISSION_DENIED", field: "session_id" });
    now += 1000;
    const ended = sessions.end(s.sessionId, "failed", { tokenName: "alice", admin: false });
    expect(ended).toMatchObject({ status: "failed", endedAt: now });
    expect(errorOf(() => sessions.end(s.sessionId, "passed", { tokenName: "alice", admin: false }))).toEqual({ code: "SESSION_ENDED", field: "session_id" });
    expect(errorOf(() => sessions.end(s.sessionId, "passed", { tokenName: "root", admin: true }))).toEqual({ code: "SESSION_ENDED", field: "session_id" });
    const other = sessions.start("alice", lease(), opts);
    expect(sessions.end(other.sessionId, "passed", { tokenName: "root", admin: true }).status).toBe("passed");
    expect(seen.map((r) => r.status)).toEqual(["running", "failed", "running", "passed"]);
  });

  it("answers SESSION_NOT_FOUND for an unknown id and INVALID_ARGUMENT for none", () => {
    const { sessions } = setup();
    expect(errorOf(() => sessions.get("nope"))).toEqual({ code: "SESSION_NOT_FOUND", field: "session_id" });
    expect(errorOf(() => sessions.end("nope", "passed", { tokenName: "a", admin: true }))).toEqual({ code: "SESSION_NOT_FOUND", field: "session_id" });
    expect(errorOf(() => sessions.get(""))).toEqual({ code: "INVALID_ARGUMENT", field: "session_id" });
  });

  it("ends the running sessions of an ended lease as lease_ended, and only those", () => {
    const { sessions } = setup();
    const a = sessions.start("alice", lease("l-1"), opts);
    const b = sessions.start("bob", lease("l-2", "pd-2"), opts);
    const done = sessions.start("alice", lease("l-1"), opts);
    sessions.end(done.sessionId, "passed", { tokenName: "alice", admin: false });
    now += 5;
    expect(sessions.endForLease("l-1").map((r) => r.sessionId)).toEqual([a.sessionId]);
    expect(sessions.get(a.sessionId)).toMatchObject({ status: "lease_ended", endedAt: now });
    expect(sessions.get(done.sessionId).status).toBe("passed");
    expect(sessions.get(b.sessionId).status).toBe("running");
    expect(errorOf(() => sessions.end(a.sessionId, "passed", { tokenName: "alice", admin: false }))).toEqual({ code: "SESSION_ENDED", field: "session_id" });
  });

  it("settles, at start-up, running sessions whose lease is no longer active", () => {
    const { sessions } = setup();
    const kept = sessions.start("alice", lease("l-1"), opts);
    const orphan = sessions.start("bob", lease("l-2", "pd-2"), opts);
    expect(sessions.settle(new Set(["l-1"])).map((r) => r.sessionId)).toEqual([orphan.sessionId]);
    expect(sessions.get(kept.sessionId).status).toBe("running");
    expect(sessions.get(orphan.sessionId).status).toBe("lease_ended");
  });
});

describe("Sessions.listPage", () => {
  it("pages newest first by (create time, id) without repeats, with filters bound to the token", () => {
    const { sessions } = setup();
    const made: SessionRow[] = [];
    for (let i = 0; i < 7; i++) {
      // Two sessions share each millisecond: the id breaks the tie.
      if (i % 2 === 0) now += 1;
      made.push(sessions.start(i % 3 === 0 ? "bob" : "alice", lease(`l-${i % 2}`, `pd-${i % 2}`), opts));
    }
    const expected = [...made].sort((x, y) => y.createdAt - x.createdAt || (x.sessionId < y.sessionId ? 1 : -1)).map((r) => r.sessionId);
    const got: string[] = [];
    let pageToken = "";
    do {
      const page = sessions.listPage({}, { pageSize: 3, pageToken });
      got.push(...page.items.map((r) => r.sessionId));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(got).toEqual(expected);

    const bobs = sessions.listPage({ owner: "bob" }, { pageSize: 0, pageToken: "" }).items;
    expect(bobs.map((r) => r.owner)).toEqual(["bob", "bob", "bob"]);
    expect(sessions.listPage({ physicalId: "pd-1" }, { pageSize: 0, pageToken: "" }).items.every((r) => r.physicalId === "pd-1")).toBe(true);
    sessions.end(made[0]?.sessionId ?? "", "failed", { tokenName: "bob", admin: false });
    expect(sessions.listPage({ status: "failed" }, { pageSize: 0, pageToken: "" }).items.map((r) => r.sessionId)).toEqual([made[0]?.sessionId]);

    const first = sessions.listPage({ owner: "alice" }, { pageSize: 1, pageToken: "" });
    expect(errorOf(() => sessions.listPage({ owner: "bob" }, { pageSize: 1, pageToken: first.nextPageToken }))).toEqual({ code: "INVALID_ARGUMENT", field: "page_token" });
  });
});
