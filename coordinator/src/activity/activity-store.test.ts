import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { selectPlans } from "../db/testing/query-plans.js";
import { type ActivityEntry, type ActivityStore } from "./activity-store.js";
import { createActivityStore } from "../db/stores.js";

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

  it("reads one phone's page through the activity_serial index, not the whole log", async () => {
    // The log only grows: without it, a rarely used phone's page read every entry (0.1 s per million, on the event loop).
    const s = await store();
    for (let i = 0; i < 40; i++) await s.insert(entry({ serial: `S-${i % 4}` }));
    for (const filter of [{ serial: "S-1" }, { serial: "S-1", sinceMs: 1 }]) {
      const plans = await selectPlans(opened as FarmDatabase, () => s.listBefore(filter, 30, 51));
      expect(plans, JSON.stringify(filter)).toEqual([expect.stringMatching(/\bactivity_serial\b/)]);
    }
  });

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
