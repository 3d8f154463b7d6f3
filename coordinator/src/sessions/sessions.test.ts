import { afterEach, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { sqliteDatabase, type FarmDatabase } from "../db/database.js";
import { Sessions } from "./sessions.js";
import { type SessionRow } from "./session-store.js";
import { secretLeaks } from "@farm/shared/testing/secret-leaks";
import { createSessionStore } from "../db/stores.js";

// A fake clock: time moves only when a test says so.
let now = 1_700_000_000_000;
const clock = () => now;
let opened: FarmDatabase | undefined;

afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

function setup() {
  opened = sqliteDatabase(":memory:");
  const store = createSessionStore(opened);
  const sessions = new Sessions(store, clock);
  const seen: SessionRow[] = [];
  sessions.events.on("session", (r) => seen.push({ ...r }));
  return { store, sessions, seen };
}

async function errorOf(fn: () => Promise<unknown>): Promise<{ code: string; field: string }> {
  try {
    await fn();
  } catch (err) {
    const d = ConnectError.from(err).findDetails(ErrorDetailSchema)[0];
    return { code: d?.code ?? "", field: d?.field ?? "" };
  }
  throw new Error("did not throw");
}

const lease = (leaseId = "l-1", physicalId = "pd-1") => ({ leaseId, physicalId, agentId: "a-1", serial: "S-1" });
const opts = { name: "smoke", context: { build: "1.2.3" }, ocr: true };

describe("Sessions", () => {
  it("stores a started session before telling anyone, and reads it back", async () => {
    const { sessions, store, seen } = setup();
    const s = await sessions.start("alice", lease(), opts);
    expect(await store.get(s.sessionId)).toEqual({ ...s, status: "running", endedAt: null, stepCount: 0, owner: "alice", context: { build: "1.2.3" }, ocr: true, createdAt: now });
    expect(seen.map((r) => r.status)).toEqual(["running"]);
    expect((await sessions.get(s.sessionId)).name).toBe("smoke");
  });

  it("refuses a name or context that is too large, naming the field", async () => {
    const { sessions } = setup();
    expect(await errorOf(() => sessions.start("alice", lease(), { ...opts, name: "x".repeat(201) }))).toEqual({ code: "INVALID_ARGUMENT", field: "name" });
    expect(await errorOf(() => sessions.start("alice", lease(), { ...opts, context: { big: "x".repeat(17_000) } }))).toEqual({ code: "INVALID_ARGUMENT", field: "context" });
  });

  it("is ended once, by its owner or an admin only", async () => {
    const { sessions, seen } = setup();
    const s = await sessions.start("alice", lease(), opts);
    expect(await errorOf(() => sessions.end(s.sessionId, "passed", { tokenName: "bob", admin: false }))).toEqual({ code: "PERMISSION_DENIED", field: "session_id" });
    now += 1000;
    const ended = await sessions.end(s.sessionId, "failed", { tokenName: "alice", admin: false });
    expect(ended).toMatchObject({ status: "failed", endedAt: now });
    expect(await errorOf(() => sessions.end(s.sessionId, "passed", { tokenName: "alice", admin: false }))).toEqual({ code: "SESSION_ENDED", field: "session_id" });
    expect(await errorOf(() => sessions.end(s.sessionId, "passed", { tokenName: "root", admin: true }))).toEqual({ code: "SESSION_ENDED", field: "session_id" });
    const other = await sessions.start("alice", lease(), opts);
    expect((await sessions.end(other.sessionId, "passed", { tokenName: "root", admin: true })).status).toBe("passed");
    expect(seen.map((r) => r.status)).toEqual(["running", "failed", "running", "passed"]);
  });

  it("answers SESSION_NOT_FOUND for an unknown id and INVALID_ARGUMENT for none", async () => {
    const { sessions } = setup();
    expect(await errorOf(() => sessions.get("nope"))).toEqual({ code: "SESSION_NOT_FOUND", field: "session_id" });
    expect(await errorOf(() => sessions.end("nope", "passed", { tokenName: "a", admin: true }))).toEqual({ code: "SESSION_NOT_FOUND", field: "session_id" });
    expect(await errorOf(() => sessions.get(""))).toEqual({ code: "INVALID_ARGUMENT", field: "session_id" });
  });

  it("ends the running sessions of an ended lease as lease_ended, and only those", async () => {
    const { sessions } = setup();
    const a = await sessions.start("alice", lease("l-1"), opts);
    const b = await sessions.start("bob", lease("l-2", "pd-2"), opts);
    const done = await sessions.start("alice", lease("l-1"), opts);
    await sessions.end(done.sessionId, "passed", { tokenName: "alice", admin: false });
    now += 5;
    expect((await sessions.endForLease("l-1")).map((r) => r.sessionId)).toEqual([a.sessionId]);
    expect(await sessions.get(a.sessionId)).toMatchObject({ status: "lease_ended", endedAt: now });
    expect((await sessions.get(done.sessionId)).status).toBe("passed");
    expect((await sessions.get(b.sessionId)).status).toBe("running");
    expect(await errorOf(() => sessions.end(a.sessionId, "passed", { tokenName: "alice", admin: false }))).toEqual({ code: "SESSION_ENDED", field: "session_id" });
  });

  it("announces a session started as its lease ends as running, then ended, and keeps none of its secrets", async () => {
    const { sessions, seen } = setup();
    const started = sessions.start("alice", lease("l-1"), { ...opts, secrets: [{ name: "PIN", value: "12345" }] });
    const ended = sessions.endForLease("l-1");
    const s = await started;
    expect((await ended).map((r) => r.sessionId)).toEqual([s.sessionId]);
    expect(seen.map((r) => r.status)).toEqual(["running", "lease_ended"]);
    expect(await errorOf(async () => sessions.secretsOf(s))).toEqual({ code: "SESSION_SECRETS_LOST", field: "session_id" });
  });

  it("masks its own secrets in its name and context before they are stored or announced", async () => {
    const { sessions, store, seen } = setup();
    const secret = "Zq7\"Kx/9Wv\\pL2mN8rT";
    const s = await sessions.start("alice", lease(), {
      name: `login as ${secret} on staging`,
      context: { user: { password: secret, note: `pw=${JSON.stringify(secret)}` }, [secret]: [secret] },
      ocr: false,
      secrets: [{ name: "PW", value: secret }],
    });
    expect(s.name).toBe("login as [redacted] on staging");
    expect(s.context).toEqual({ user: { password: "[redacted]", note: "pw=\"[redacted]\"" }, "[redacted]": ["[redacted]"] });
    const stored = await store.get(s.sessionId);
    expect(secretLeaks(stored, secret)).toEqual([]);
    expect(secretLeaks(seen, secret)).toEqual([]);
    expect(stored?.name).toBe(s.name);
  });

  it("refuses a NUL character in a name or context, and finds nothing for one in an id or filter", async () => {
    const { sessions } = setup();
    expect(await errorOf(() => sessions.start("alice", lease(), { ...opts, name: "a\0b" }))).toEqual({ code: "INVALID_ARGUMENT", field: "name" });
    expect(await errorOf(() => sessions.start("alice", lease(), { ...opts, context: { list: [{ "k\0": 1 }] } }))).toEqual({ code: "INVALID_ARGUMENT", field: "context" });
    expect(await errorOf(() => sessions.get("s\0"))).toEqual({ code: "SESSION_NOT_FOUND", field: "session_id" });
    await sessions.start("alice", lease(), opts);
    expect((await sessions.listPage({ owner: "alice\0" }, { pageSize: 0, pageToken: "" })).items).toEqual([]);
  });

  it("settles, at start-up, running sessions whose lease is no longer active", async () => {
    const { sessions } = setup();
    const kept = await sessions.start("alice", lease("l-1"), opts);
    const orphan = await sessions.start("bob", lease("l-2", "pd-2"), opts);
    expect((await sessions.settle(new Set(["l-1"]))).map((r) => r.sessionId)).toEqual([orphan.sessionId]);
    expect((await sessions.get(kept.sessionId)).status).toBe("running");
    expect((await sessions.get(orphan.sessionId)).status).toBe("lease_ended");
  });
});

describe("Sessions.listPage", () => {
  it("pages newest first by (create time, id) without repeats, with filters bound to the token", async () => {
    const { sessions } = setup();
    const made: SessionRow[] = [];
    for (let i = 0; i < 7; i++) {
      // Two sessions share each millisecond: the id breaks the tie.
      if (i % 2 === 0) now += 1;
      made.push(await sessions.start(i % 3 === 0 ? "bob" : "alice", lease(`l-${i % 2}`, `pd-${i % 2}`), opts));
    }
    const expected = [...made].sort((x, y) => y.createdAt - x.createdAt || (x.sessionId < y.sessionId ? 1 : -1)).map((r) => r.sessionId);
    const got: string[] = [];
    let pageToken = "";
    do {
      const page = await sessions.listPage({}, { pageSize: 3, pageToken });
      got.push(...page.items.map((r) => r.sessionId));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(got).toEqual(expected);

    const bobs = (await sessions.listPage({ owner: "bob" }, { pageSize: 0, pageToken: "" })).items;
    expect(bobs.map((r) => r.owner)).toEqual(["bob", "bob", "bob"]);
    expect((await sessions.listPage({ physicalId: "pd-1" }, { pageSize: 0, pageToken: "" })).items.every((r) => r.physicalId === "pd-1")).toBe(true);
    await sessions.end(made[0]?.sessionId ?? "", "failed", { tokenName: "bob", admin: false });
    expect((await sessions.listPage({ status: "failed" }, { pageSize: 0, pageToken: "" })).items.map((r) => r.sessionId)).toEqual([made[0]?.sessionId]);

    const first = await sessions.listPage({ owner: "alice" }, { pageSize: 1, pageToken: "" });
    expect(await errorOf(() => sessions.listPage({ owner: "bob" }, { pageSize: 1, pageToken: first.nextPageToken }))).toEqual({ code: "INVALID_ARGUMENT", field: "page_token" });
  });
});
