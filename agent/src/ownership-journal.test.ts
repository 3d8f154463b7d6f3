import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openAgentDb } from "./db/open-agent-db.js";
import { OwnershipJournal } from "./ownership-journal.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-journal-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const action = (physicalId: string, i: number, padding = "") => ({
  physicalId,
  serial: "s1",
  kind: "shell",
  request: { command: `echo ${i}${padding}` },
  bootId: "b",
  deadlineAt: Date.now() + 1000,
  requestedBy: "test",
});

describe("OwnershipJournal", () => {
  it("turns actions left pending by a dead process into unresolved unknowns", () => {
    const file = join(dir, "agent.db");
    const first = openAgentDb(file);
    const j1 = new OwnershipJournal(first.db, first.sqlite);
    const done = j1.begin(action("p1", 1));
    j1.settle(done.actionId, { exitCode: 0 }, "completed");
    const inflight = j1.begin(action("p1", 2));
    first.close(); // the process "dies" here

    const second = openAgentDb(file);
    const j2 = new OwnershipJournal(second.db, second.sqlite);
    expect(j2.recoverAfterRestart()).toBe(1);
    expect(j2.hasUnresolved("p1")).toBe(true);
    expect(j2.unresolved("p1").map((a) => [a.actionId, a.state, a.ambiguous, a.dispatched])).toEqual([[inflight.actionId, "unknown", true, null]]);
    expect(j2.get(done.actionId)?.state).toBe("settled");
    j2.settle(inflight.actionId, { proof: "x" }, "reconciled");
    expect(j2.hasUnresolved("p1")).toBe(false);
    second.close();
  });

  it("bounds settled history per device and never drops unresolved actions", () => {
    const db = openAgentDb(join(dir, "agent.db"));
    const j = new OwnershipJournal(db.db, db.sqlite, 64 * 1024);
    const stuck = j.begin(action("p1", 0));
    j.unknown(stuck.actionId, null, "lost");
    const pad = "x".repeat(2000);
    for (let i = 1; i <= 100; i++) {
      const a = j.begin(action("p1", i, pad));
      j.settle(a.actionId, { exitCode: 0 }, "completed");
    }
    const other = j.begin(action("p2", 1));
    const kept = j.recent("p1", 1000);
    expect(kept.length).toBeLessThan(40);
    expect(kept.reduce((n, a) => n + a.size, 0)).toBeLessThanOrEqual(64 * 1024);
    expect(j.get(stuck.actionId)?.state).toBe("unknown");
    expect(kept[0]?.requestJson).toContain("echo 100");
    expect(j.get(other.actionId)?.state).toBe("pending");
    db.close();
  });
});
