import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { Sessions } from "./sessions.js";
import { SessionSteps, type StoredStep } from "./session-steps.js";
import { SqliteSessionStepStore } from "./sqlite-session-step-store.js";
import { SqliteSessionStore } from "./sqlite-session-store.js";
import type { StepRecordV2 } from "./step-record.js";

let opened: OpenedDatabase | undefined;
afterEach(() => {
  opened?.close();
  opened = undefined;
});

const lease = { leaseId: "l-1", physicalId: "pd-1", agentId: "a-1", serial: "S-1" };

function setup() {
  opened = openDatabase(":memory:");
  let t = 1_000;
  const now = () => ++t;
  const sessions = new Sessions(new SqliteSessionStore(opened.db), now);
  const steps = new SessionSteps(new SqliteSessionStepStore(opened.db), now);
  const s = sessions.start("alice", lease, { name: "", context: {}, ocr: false });
  return { sessions, steps, s };
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
  it("numbers steps in routing order, stores them whenever their answer comes, and counts them and the failed ones on the session", () => {
    const { sessions, steps, s } = setup();
    const first = steps.reserve(s.sessionId);
    const second = steps.reserve(s.sessionId);
    expect([first, second]).toEqual([1, 2]);
    const seen: StoredStep[] = [];
    steps.events.on("step", (st) => seen.push(st));
    // The second answer arrives first.
    expect(steps.append(s.sessionId, second, record("key", false), { failed: true, ocr: null })?.session).toMatchObject({ stepCount: 1, failedStepCount: 1 });
    expect(steps.append(s.sessionId, first, record("tap"), { failed: false, ocr: null })?.session).toMatchObject({ stepCount: 2, failedStepCount: 1 });
    expect(seen.map((x) => x.sequence)).toEqual([2, 1]);
    expect(sessions.get(s.sessionId)).toMatchObject({ stepCount: 2, failedStepCount: 1 });
    const page = steps.listPage(s.sessionId, { pageSize: 0, pageToken: "" });
    expect(page.items.map((x) => [x.sequence, x.view.action])).toEqual([
      [1, "tap"],
      [2, "key"],
    ]);
  });

  it("continues numbering after a restart from what is stored, leaving a gap for a step whose record was never written", () => {
    const { steps, s } = setup();
    steps.reserve(s.sessionId);
    const two = steps.reserve(s.sessionId);
    steps.append(s.sessionId, two, record("tap"), { failed: false, ocr: null });
    const again = new SessionSteps(new SqliteSessionStepStore((opened as OpenedDatabase).db));
    expect(again.reserve(s.sessionId)).toBe(3);
  });

  it("pages a long timeline oldest first without repeats", () => {
    const { steps, s } = setup();
    for (let i = 0; i < 5; i++) steps.append(s.sessionId, steps.reserve(s.sessionId), record(`a${i}`), { failed: false, ocr: null });
    const got: number[] = [];
    let token = "";
    do {
      const p = steps.listPage(s.sessionId, { pageSize: 2, pageToken: token });
      got.push(...p.items.map((x) => x.sequence));
      token = p.nextPageToken;
    } while (token);
    expect(got).toEqual([1, 2, 3, 4, 5]);
  });

  it("stores nothing for a session that does not exist", () => {
    const { steps } = setup();
    expect(steps.append("nope", 1, record("tap"), { failed: false, ocr: null })).toBeUndefined();
    expect(steps.get("nope", 1)).toBeUndefined();
  });

  it("keeps OCR beside the record: pending until set, found again after a restart, and announced when it changes", () => {
    const { steps, s } = setup();
    steps.append(s.sessionId, steps.reserve(s.sessionId), { ...record("tap"), before: { sha256: "c".repeat(64), width: 1, height: 1, size: 1 } }, { failed: false, ocr: { status: "pending", observations: [] } });
    steps.append(s.sessionId, steps.reserve(s.sessionId), record("key"), { failed: false, ocr: null });
    expect(steps.pendingOcr().map((x) => x.sequence)).toEqual([1]);
    const seen: StoredStep[] = [];
    steps.events.on("step", (st) => seen.push(st));
    const done = steps.setOcr(s.sessionId, 1, { status: "done", observations: [{ text: "OK", confidence: 0.9, bounds: { left: 1, top: 2, right: 3, bottom: 4 } }], durationMs: 5 });
    expect(done?.ocr).toMatchObject({ status: "done", observations: [{ text: "OK" }] });
    expect(seen).toHaveLength(1);
    expect(steps.pendingOcr()).toEqual([]);
    // The record itself is unchanged by OCR.
    expect(steps.get(s.sessionId, 1)?.view.action).toBe("tap");
    expect(steps.setOcr(s.sessionId, 9, { status: "done", observations: [] })).toBeUndefined();
  });

  it("knows which screenshots a session shows, newest first, and only that session's", () => {
    const { steps, s } = setup();
    for (const c of ["a", "b", "a"]) steps.addImage({ sessionId: s.sessionId, sha256: c.repeat(64), size: 1, width: 2, height: 3, mimeType: "image/png" });
    expect(steps.knownImages(s.sessionId)).toEqual(["b".repeat(64), "a".repeat(64)]);
    expect(steps.image(s.sessionId, "a".repeat(64))).toMatchObject({ width: 2, height: 3 });
    expect(steps.image("other", "a".repeat(64))).toBeUndefined();
  });
});
