import { afterEach, describe, expect, it } from "vitest";
import { sqliteDatabase, type FarmDatabase } from "../db/database.js";
import { Sessions } from "./sessions.js";
import { SessionSteps, type StoredStep } from "./session-steps.js";
import type { StepRecordV2 } from "./step-record.js";
import { createSessionStepStore, createSessionStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

const lease = { leaseId: "l-1", physicalId: "pd-1", agentId: "a-1", serial: "S-1" };

async function setup() {
  const db = sqliteDatabase(":memory:");
  opened = db;
  let t = 1_000;
  const now = () => ++t;
  const sessions = new Sessions(createSessionStore(db), now);
  const steps = new SessionSteps(createSessionStepStore(db), now);
  const s = await sessions.start("alice", lease, { name: "", context: {}, ocr: false });
  return { db, sessions, steps, s };
}

const record = (action: string, ok = true): StepRecordV2 => ({
  version: 2,
  method: "farm.v1.DeviceService/SendInput",
  action,
  description: action,
  arguments: {},
  result: ok ? { ok: true } : { ok: false, errorCode: "INPUT_FAILED", errorMessage: "no" },
  before: null,
  after: null,
  startedAt: 1,
  durationMs: 2,
  attempts: [],
  requestedBy: "alice",
});

describe("SessionSteps", () => {
  it("numbers steps in routing order, stores them whenever their answer comes, and counts them and the failed ones on the session", async () => {
    const { sessions, steps, s } = await setup();
    const first = await steps.reserve(s.sessionId);
    const second = await steps.reserve(s.sessionId);
    expect([first, second]).toEqual([1, 2]);
    const seen: StoredStep[] = [];
    steps.events.on("step", (st) => seen.push(st));
    // The second answer arrives first.
    expect((await steps.append(s.sessionId, second, record("key", false), { failed: true, ocr: null }))?.session).toMatchObject({ stepCount: 1, failedStepCount: 1 });
    expect((await steps.append(s.sessionId, first, record("tap"), { failed: false, ocr: null }))?.session).toMatchObject({ stepCount: 2, failedStepCount: 1 });
    expect(seen.map((x) => x.sequence)).toEqual([2, 1]);
    expect(await sessions.get(s.sessionId)).toMatchObject({ stepCount: 2, failedStepCount: 1 });
    const page = await steps.listPage(s.sessionId, { pageSize: 0, pageToken: "" });
    expect(page.items.map((x) => [x.sequence, x.view.action])).toEqual([
      [1, "tap"],
      [2, "key"],
    ]);
  });

  it("continues numbering after a restart from what is stored, leaving a gap for a step whose record was never written", async () => {
    const { db, steps, s } = await setup();
    await steps.reserve(s.sessionId);
    const two = await steps.reserve(s.sessionId);
    await steps.append(s.sessionId, two, record("tap"), { failed: false, ocr: null });
    const again = new SessionSteps(createSessionStepStore(db));
    // Concurrent first reserves share one read of what is stored: no number is handed out twice.
    expect(await Promise.all([again.reserve(s.sessionId), again.reserve(s.sessionId), again.reserve(s.sessionId)])).toEqual([3, 4, 5]);
  });

  it("pages a long timeline oldest first without repeats", async () => {
    const { steps, s } = await setup();
    for (let i = 0; i < 5; i++) await steps.append(s.sessionId, await steps.reserve(s.sessionId), record(`a${i}`), { failed: false, ocr: null });
    const got: number[] = [];
    let token = "";
    do {
      const p = await steps.listPage(s.sessionId, { pageSize: 2, pageToken: token });
      got.push(...p.items.map((x) => x.sequence));
      token = p.nextPageToken;
    } while (token);
    expect(got).toEqual([1, 2, 3, 4, 5]);
  });

  it("stores nothing for a session that does not exist", async () => {
    const { steps } = await setup();
    expect(await steps.append("nope", 1, record("tap"), { failed: false, ocr: null })).toBeUndefined();
    expect(await steps.get("nope", 1)).toBeUndefined();
  });

  it("keeps OCR beside the record: pending until set, found again after a restart, and announced when it changes", async () => {
    const { steps, s } = await setup();
    await steps.append(s.sessionId, await steps.reserve(s.sessionId), { ...record("tap"), before: { sha256: "c".repeat(64), width: 1, height: 1, size: 1 } }, { failed: false, ocr: { status: "pending", observations: [] } });
    await steps.append(s.sessionId, await steps.reserve(s.sessionId), record("key"), { failed: false, ocr: null });
    expect((await steps.pendingOcr()).map((x) => x.sequence)).toEqual([1]);
    const seen: StoredStep[] = [];
    steps.events.on("step", (st) => seen.push(st));
    const done = await steps.setOcr(s.sessionId, 1, { status: "done", observations: [{ text: "OK", confidence: 0.9, bounds: { left: 1, top: 2, right: 3, bottom: 4 } }], durationMs: 5 });
    expect(done?.ocr).toMatchObject({ status: "done", observations: [{ text: "OK" }] });
    expect(seen).toHaveLength(1);
    expect(await steps.pendingOcr()).toEqual([]);
    // The record itself is unchanged by OCR.
    expect((await steps.get(s.sessionId, 1))?.view.action).toBe("tap");
    expect(await steps.setOcr(s.sessionId, 9, { status: "done", observations: [] })).toBeUndefined();
  });

  it("knows which screenshots a session shows, newest first, and only that session's", async () => {
    const { steps, s } = await setup();
    for (const c of ["a", "b", "a"]) await steps.addImage({ sessionId: s.sessionId, sha256: c.repeat(64), size: 1, width: 2, height: 3, mimeType: "image/png" });
    expect(await steps.knownImages(s.sessionId)).toEqual(["b".repeat(64), "a".repeat(64)]);
    expect(await steps.image(s.sessionId, "a".repeat(64))).toMatchObject({ width: 2, height: 3 });
    expect(await steps.image("other", "a".repeat(64))).toBeUndefined();
  });
});
