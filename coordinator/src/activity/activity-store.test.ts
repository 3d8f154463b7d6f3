import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { createActivityStore, type ActivityEntry, type ActivityStore } from "./activity-store.js";

let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

const entry = (over: Partial<ActivityEntry>): ActivityEntry => ({
  at: 1_700_000_000_123,
  caller: "alice",
  leaseId: "l-1",
  serial: "S-1",
  physicalId: "pd-1",
  agentId: "a-1",
  command: "RunShell",
  outcome: "ok",
  durationMs: 12,
  requestId: "r-1",
  detail: "echo hi",
  ...over,
});

describe.each(dialects)("ActivityStore on %s", (dialect) => {
  async function store(): Promise<ActivityStore> {
    opened = await openTestDatabase(dialect);
    return createActivityStore(opened);
  }

  it("reads one entry back by the id its insert returned, and nothing for an id never written", async () => {
    const s = await store();
    const first = await s.insert(entry({}));
    const second = await s.insert(entry({ serial: "S-2", command: "Tap", outcome: "DEVICE_OFFLINE", detail: "" }));
    expect(second.id).toBeGreaterThan(first.id);
    expect(await s.get(first.id)).toEqual(first);
    expect(await s.get(second.id)).toEqual({ ...entry({ serial: "S-2", command: "Tap", outcome: "DEVICE_OFFLINE", detail: "" }), id: second.id });
    expect(await s.get(second.id + 1)).toBeUndefined();
  });
});
