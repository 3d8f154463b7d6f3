import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "@farm/shared/log";
import { sqliteDatabase, type FarmDatabase } from "../db/database.js";
import { OcrQueueFull, type OcrOutcome } from "./ocr/ocr-pool.js";
import { SessionImageStore } from "./session-image-store.js";
import { SessionSteps, type StoredStep } from "./session-steps.js";
import { Sessions } from "./sessions.js";
import { StepOcr } from "./step-ocr.js";
import { createRedactor } from "@farm/shared/redaction/redactor";
import type { StepRecordV2 } from "./step-record.js";
import { createSessionStepStore, createSessionStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

const record = (sha256?: string): StepRecordV2 => ({
  version: 2,
  method: "farm.v1.DeviceService/SendInput",
  action: "tap",
  description: "tap",
  arguments: {},
  result: { ok: true },
  before: sha256 ? { sha256, width: 1, height: 1, size: 1 } : null,
  after: null,
  startedAt: 1,
  durationMs: 2,
  attempts: [],
  requestedBy: "alice",
});

async function setup(recognize: (path: string) => Promise<OcrOutcome>) {
  const db = sqliteDatabase(":memory:");
  opened = db;
  const sessions = new Sessions(createSessionStore(db));
  const steps = new SessionSteps(createSessionStepStore(db));
  const s = await sessions.start("alice", { leaseId: "l-1", physicalId: "pd-1", agentId: "a-1", serial: "S-1" }, { name: "", context: {}, ocr: true });
  const log = createLogger({ level: "error" });
  const ocr = new StepOcr({ recognize }, steps, new SessionImageStore("/nonexistent"), log);
  const stored = new Promise<StoredStep[]>((resolve) => {
    const seen: StoredStep[] = [];
    steps.events.on("step", (st) => {
      if (st.ocr?.status !== "pending") seen.push(st);
      if (seen.length === 2) resolve(seen);
    });
  });
  return { steps, s, ocr, log, stored };
}

describe("StepOcr", () => {
  it("resumes what a restart left pending: reads a step with a screenshot, skips one without", async () => {
    const { steps, s, ocr, stored } = await setup(async () => ({ observations: [{ text: "OK", confidence: 1, bounds: { left: 0, top: 0, right: 1, bottom: 1 } }], durationMs: 3.4 }));
    await steps.append(s.sessionId, 1, record("a".repeat(64)), { failed: false, ocr: { status: "pending", observations: [] } });
    await steps.append(s.sessionId, 2, record(), { failed: false, ocr: { status: "pending", observations: [] } });
    expect(await ocr.resume()).toBe(1);
    const seen = await stored;
    expect(seen.map((x) => [x.sequence, x.ocr?.status]).sort()).toEqual([
      [1, "done"],
      [2, "skipped"],
    ]);
    expect((await steps.get(s.sessionId, 1))?.ocr).toMatchObject({ status: "done", observations: [{ text: "OK" }], durationMs: 3 });
    expect(await steps.pendingOcr()).toEqual([]);
  });

  it("masks the session's secrets in what it read, and reads nothing of a session whose secrets a restart lost", async () => {
    const SECRET = "Zq7Kx9WvpL-ocr";
    const box = { left: 0, top: 0, right: 1, bottom: 1 };
    const { steps, s, ocr } = await setup(async () => ({ observations: [{ text: `pw ${SECRET}`, confidence: 1, bounds: box }, { text: SECRET, confidence: 1, bounds: box }], durationMs: 1 }));
    await steps.append(s.sessionId, 1, record("d".repeat(64)), { failed: false, ocr: { status: "pending", observations: [] } });
    const done = new Promise<StoredStep>((resolve) => steps.events.once("step", resolve));
    ocr.queue(s.sessionId, 1, "d".repeat(64), createRedactor({ secrets: [SECRET] }));
    expect((await done).ocr?.observations.map((o) => o.text)).toEqual(["pw [redacted]", "[redacted]"]);

    // A session with secrets, its step's OCR pending, and a coordinator that restarted: the values are gone.
    const before = new Sessions(createSessionStore(opened as FarmDatabase));
    const secretive = await before.start("alice", { leaseId: "l-2", physicalId: "pd-2", agentId: "a-1", serial: "S-2" }, { name: "", context: {}, ocr: true, secrets: [{ name: "PW", value: SECRET }] });
    await steps.append(secretive.sessionId, 1, record("d".repeat(64)), { failed: false, ocr: { status: "pending", observations: [] } });
    const restarted = new StepOcr(
      { recognize: async () => ({ observations: [{ text: SECRET, confidence: 1, bounds: box }], durationMs: 1 }) },
      steps,
      new SessionImageStore("/nonexistent"),
      createLogger({ level: "error" }),
      new Sessions(createSessionStore(opened as FarmDatabase)),
    );
    const skipped = new Promise<StoredStep>((resolve) => steps.events.on("step", (st) => st.sessionId === secretive.sessionId && resolve(st)));
    await restarted.resume();
    expect((await skipped).ocr).toMatchObject({ status: "skipped", observations: [] });
  });

  it("says a step was skipped when the queue was full, and logs (does not throw) when its OCR cannot be stored", async () => {
    const { steps, s, ocr, log } = await setup(() => Promise.reject(new OcrQueueFull("full")));
    await steps.append(s.sessionId, 1, record("b".repeat(64)), { failed: false, ocr: { status: "pending", observations: [] } });
    const skipped = new Promise<StoredStep>((resolve) => steps.events.once("step", resolve));
    ocr.queue(s.sessionId, 1, "b".repeat(64));
    expect((await skipped).ocr).toMatchObject({ status: "skipped", error: "the OCR queue was full" });

    const error = vi.spyOn(log, "error").mockImplementation(() => undefined);
    const failing = vi.spyOn(steps, "setOcr").mockRejectedValue(new Error("database is gone"));
    ocr.queue(s.sessionId, 1, "c".repeat(64));
    await vi.waitFor(() => expect(error).toHaveBeenCalledWith("a step's OCR could not be stored", { sessionId: s.sessionId, sequence: 1, error: "database is gone" }));
    failing.mockRestore();
  });
});
