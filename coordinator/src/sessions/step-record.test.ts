import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { cutStrings, readStepRecord, type StepRecordV2 } from "./step-record.js";

const legacy = readFileSync(new URL("./fixtures/step-record-v1.json", import.meta.url), "utf8");

const v2: StepRecordV2 = {
  version: 2,
  method: "farm.v1.DeviceService/SendInput",
  action: "tap",
  description: "tap (10, 20)",
  arguments: { tap: { x: 10, y: 20 } },
  result: { ok: true, actionId: "a-1", dispatched: true, ambiguous: false },
  before: { sha256: "a".repeat(64), width: 1080, height: 2400, size: 10, capturedAt: 1 },
  after: { sha256: "b".repeat(64), width: 1080, height: 2400, size: 11, capturedAt: 3 },
  startedAt: 2,
  durationMs: 1,
  attempts: [],
  requestedBy: "alice",
};

describe("readStepRecord", () => {
  it("reads the shipped legacy single-screenshot record with its image as the after-action screenshot", () => {
    const view = readStepRecord(legacy, 1234);
    expect(view.recordVersion).toBe(1);
    expect(view.before).toBeNull();
    expect(view.after).toEqual({ evidenceId: "0b6f3c1e-2a4d-4c8e-9f10-5d2e7a9b1c33", path: "screenshot.png" });
    expect(view.startedAt).toBe(1234);
    expect(view.result).toEqual({ ok: true });
    expect(view.action).toBe("screenshot");
  });

  it("keeps a legacy record whose path is outside the store readable, with the image marked missing", () => {
    const view = readStepRecord(JSON.stringify({ screenshotPath: "/etc/passwd" }), 5);
    expect(view.recordVersion).toBe(1);
    expect(view.after?.error?.code).toBe("NOT_FOUND");
    expect(view.after?.evidenceId).toBeUndefined();
  });

  it("reads version 2 as written", () => {
    const view = readStepRecord(JSON.stringify(v2), 99);
    const { version, ...rest } = v2;
    expect(version).toBe(2);
    expect(view).toEqual({ ...rest, recordVersion: 2, artifacts: [] });
  });

  it("reads damaged and future records as failed steps that say why, never throwing", () => {
    expect(readStepRecord("{not json", 7)).toMatchObject({ recordVersion: 0, action: "unreadable", startedAt: 7, result: { ok: false } });
    expect(readStepRecord("[1,2]", 7).description).toMatch(/not a JSON object/);
    expect(readStepRecord(JSON.stringify({ version: 9, method: "x" }), 7)).toMatchObject({ recordVersion: 9, action: "unreadable", description: expect.stringMatching(/version 9/) });
  });
});

describe("cutStrings", () => {
  it("cuts long strings anywhere in a JSON value and says by how much", () => {
    const out = cutStrings({ a: "x".repeat(10), b: ["y".repeat(3)], c: 1, d: null }, 5) as Record<string, unknown>;
    expect(out["a"]).toBe("xxxxx…[5 more characters]");
    expect(out["b"]).toEqual(["yyy"]);
    expect(out["c"]).toBe(1);
    expect(out["d"]).toBeNull();
  });
});
