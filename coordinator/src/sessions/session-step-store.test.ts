import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { type SessionStepStore, type StepRow } from "./session-step-store.js";
import { type SessionRow } from "./session-store.js";
import { createSessionStepStore, createSessionStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

const session = (sessionId: string): SessionRow => ({
  sessionId,
  name: "",
  physicalId: "pd-1",
  serial: "S-1",
  agentId: "a-1",
  leaseId: "l-1",
  owner: "alice",
  status: "running",
  createdAt: 100,
  endedAt: null,
  stepCount: 0,
  failedStepCount: 0,
  context: {},
  ocr: true,
  policyJson: "",
  policySha256: "",
  secretNames: [],
});

const step = (sessionId: string, sequence: number, ocr: string | null = null): StepRow => ({ sessionId, sequence, record: `{"action":"a${sequence}"}`, ocr, createdAt: 1_700_000_000_000 + sequence });
const image = (sessionId: string, c: string) => ({ sessionId, sha256: c.repeat(64), size: 5_000_000_000, width: 2, height: 3, mimeType: "image/png" });

describe.each(dialects)("SessionStepStore on %s", (dialect) => {
  async function stores(): Promise<SessionStepStore> {
    opened = await openTestDatabase(dialect);
    const sessions = createSessionStore(opened);
    await sessions.insert(session("s-1"));
    await sessions.insert(session("s-2"));
    return createSessionStepStore(opened);
  }

  it("stores a step and counts it (and its failure) on its session in one write", async () => {
    const s = await stores();
    expect(await s.append(step("s-1", 2), true)).toMatchObject({ sessionId: "s-1", stepCount: 1, failedStepCount: 1 });
    expect(await s.append(step("s-1", 1), false)).toMatchObject({ stepCount: 2, failedStepCount: 1 });
    expect(await s.get("s-1", 2)).toEqual(step("s-1", 2));
    expect(await s.get("s-1", 3)).toBeUndefined();
    expect(await s.maxSequence("s-1")).toBe(2);
    expect(await s.maxSequence("s-2")).toBe(0);
  });

  it("stores nothing for a session that does not exist", async () => {
    const s = await stores();
    expect(await s.append(step("nope", 1), false)).toBeUndefined();
    expect(await s.get("nope", 1)).toBeUndefined();
    expect(await s.maxSequence("nope")).toBe(0);
  });

  it("refuses a sequence already stored, and leaves the session's counts as they were", async () => {
    const s = await stores();
    await s.append(step("s-1", 1), false);
    await expect(s.append({ ...step("s-1", 1), record: "{}" }, true)).rejects.toThrow();
    expect(await s.get("s-1", 1)).toEqual(step("s-1", 1));
    expect(await s.append(step("s-1", 2), false)).toMatchObject({ stepCount: 2, failedStepCount: 0 });
  });

  it("counts every one of concurrent appends", async () => {
    const s = await stores();
    await Promise.all(Array.from({ length: 8 }, (_, i) => s.append(step("s-1", i + 1), i % 2 === 0)));
    expect(await s.append(step("s-1", 9), false)).toMatchObject({ stepCount: 9, failedStepCount: 4 });
  });

  it("lists a timeline oldest first after a sequence, one session's only", async () => {
    const s = await stores();
    for (const n of [3, 1, 2, 5]) await s.append(step("s-1", n), false);
    await s.append(step("s-2", 4), false);
    expect((await s.listAfter("s-1", 0, 10)).map((r) => r.sequence)).toEqual([1, 2, 3, 5]);
    expect((await s.listAfter("s-1", 2, 2)).map((r) => r.sequence)).toEqual([3, 5]);
    expect(await s.listAfter("s-1", 5, 10)).toEqual([]);
  });

  it("finds and replaces pending OCR", async () => {
    const s = await stores();
    await s.append(step("s-1", 1, "{\"status\":\"pending\",\"observations\":[]}"), false);
    await s.append(step("s-1", 2, "{\"status\":\"done\",\"observations\":[]}"), false);
    await s.append(step("s-2", 1, null), false);
    expect((await s.pendingOcr(10)).map((r) => [r.sessionId, r.sequence])).toEqual([["s-1", 1]]);
    expect(await s.setOcr("s-1", 1, "{\"status\":\"failed\",\"observations\":[]}")).toMatchObject({ sequence: 1, ocr: "{\"status\":\"failed\",\"observations\":[]}", record: step("s-1", 1).record });
    expect(await s.pendingOcr(10)).toEqual([]);
    expect(await s.setOcr("s-1", 9, "{}")).toBeUndefined();
  });

  it("keeps a session's images once each, newest first", async () => {
    const s = await stores();
    for (const c of ["a", "b", "a", "c"]) await s.addImage(image("s-1", c));
    await s.addImage(image("s-2", "d"));
    expect(await s.recentImages("s-1", 10)).toEqual(["c", "b", "a"].map((c) => c.repeat(64)));
    expect(await s.recentImages("s-1", 2)).toEqual(["c", "b"].map((c) => c.repeat(64)));
    expect(await s.image("s-1", "a".repeat(64))).toEqual(image("s-1", "a"));
    expect(await s.image("s-2", "a".repeat(64))).toBeUndefined();
  });
});
