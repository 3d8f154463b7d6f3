import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "./database.js";
import { dialects, openTestDatabase } from "./testing/test-database.js";
import { selectPlans } from "./testing/query-plans.js";
import { createEvidenceIndexStore, createSessionStore, createVideoSessionStore } from "./stores.js";

let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

/**
 * Bundles, sessions and recordings only grow. A page of one phone's (the
 * CLI's --device, the dashboard's device page) read newest first through
 * the table's time index read every other phone's rows on the way, all of
 * them for a phone rarely used: each list needs an index led by the phone.
 */
describe.each(dialects)("one phone's page on %s", (dialect) => {
  it.each(
    [
      ["evidence", "evidence_serial_created", (db: FarmDatabase) => createEvidenceIndexStore(db).listAfter({ serial: "S-1" }, [Date.now(), "z"], 51)],
      ["sessions", "sessions_physical_created", (db: FarmDatabase) => createSessionStore(db).listAfter({ physicalId: "pd-1" }, [Date.now(), "z"], 51)],
      ["video sessions", "video_sessions_serial_created", (db: FarmDatabase) => createVideoSessionStore(db).listAfter({ serial: "S-1" }, [Date.now(), "z"], 51)],
    ] as const,
  )("%s are read through %s", async (_name, index, list) => {
    const db = await openTestDatabase(dialect);
    opened = db;
    const plans = await selectPlans(db, () => list(db));
    expect(plans.length).toBe(1);
    expect(plans[0]).toMatch(new RegExp(`\\b${index}\\b`));
  });
});
