import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { canonicalJson } from "@farm/shared/canonical-json";
import { openAgentDb } from "../db/open-agent-db.js";
import { openHostJournalDb } from "../db/host-journal-db.js";
import { actions as legacyActions } from "../db/schema.js";
import { JOURNAL_QUERIES, OwnershipJournal } from "./ownership-journal.js";

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
  it("keeps a request's hash keyed, so typed text cannot be found by hashing guesses (a device job writes it on the phone)", () => {
    const h = openHostJournalDb(dir);
    try {
      const j = new OwnershipJournal(h.db, h.sqlite);
      const typed = j.begin({ ...action("p1", 0), kind: "input", request: { kind: "text", text: "4711" }, agentId: "a" });
      const guesses = new Set(Array.from({ length: 10_000 }, (_, i) => createHash("sha256").update(canonicalJson({ kind: "text", text: String(i).padStart(4, "0") })).digest("hex")));
      expect(typed.requestSha256).toMatch(/^[0-9a-f]{64}$/);
      expect(guesses.has(typed.requestSha256)).toBe(false);
      // Kept as written: a device job's record is checked against the stored value, never a recomputed one.
      expect(j.get(typed.actionId)?.requestSha256).toBe(typed.requestSha256);
    } finally {
      h.close();
    }
  });

  it("finds a device's unresolved entries without reading its settled history", () => {
    // Every action reads them; a device's history holds thousands of settled rows.
    const h = openHostJournalDb(dir);
    try {
      const j = new OwnershipJournal(h.db, h.sqlite);
      for (let i = 0; i < 40; i++) j.settle(j.begin({ ...action("p1", i), agentId: "a" }).actionId, { exitCode: 0 }, "completed");
      const lost = j.begin({ ...action("p1", 40), agentId: "a" });
      j.unknown(lost.actionId, true, "stream cut");
      const inflight = j.begin({ ...action("p1", 41), agentId: "a" });
      j.begin({ ...action("p2", 1), agentId: "a" });
      for (const [name, query] of Object.entries(JOURNAL_QUERIES)) {
        const plan = (h.sqlite.prepare(`EXPLAIN QUERY PLAN ${query}`).all("p1") as { detail: string }[]).map((r) => r.detail).join("; ");
        expect(plan, name).toMatch(/USING (COVERING )?INDEX actions_open\b/);
      }
      expect(new Set(j.unresolvedIds("p1"))).toEqual(new Set([lost.actionId, inflight.actionId]));
      expect(j.unknownIds("p1")).toEqual([lost.actionId]);
      expect(j.unresolved("p1").map((a) => a.state).sort()).toEqual(["pending", "unknown"]);
    } finally {
      h.close();
    }
  });

  it("adds the unresolved index to a journal an older version created", () => {
    const old = openHostJournalDb(dir);
    old.sqlite.exec("DROP INDEX actions_open");
    old.close();
    const h = openHostJournalDb(dir);
    try {
      expect(h.sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'actions_open'").get()).toEqual({ name: "actions_open" });
    } finally {
      h.close();
    }
  });

  it("is one journal for every agent process sharing the lock dir; orphaned pending entries become unknown", () => {
    const first = openHostJournalDb(dir);
    const j1 = new OwnershipJournal(first.db, first.sqlite);
    const done = j1.begin({ ...action("p1", 1), agentId: "agent-a" });
    j1.settle(done.actionId, { exitCode: 0 }, "completed");
    const inflight = j1.begin({ ...action("p1", 2), agentId: "agent-a" });

    // A second agent process opens the same host journal and sees it at once.
    const second = openHostJournalDb(dir);
    const j2 = new OwnershipJournal(second.db, second.sqlite);
    expect(j2.hasUnresolved("p1")).toBe(true);
    expect(j2.pendingDevices()).toEqual(["p1"]);
    first.close(); // agent A "dies" mid-action
    expect(j2.orphanPending("p1")).toBe(1);
    expect(j2.unresolved("p1").map((a) => [a.actionId, a.state, a.ambiguous, a.dispatched, a.agentId])).toEqual([[inflight.actionId, "unknown", true, null, "agent-a"]]);
    expect(j2.unresolvedIds("p1")).toEqual([inflight.actionId]);
    expect(j2.get(done.actionId)?.state).toBe("settled");
    j2.progress(inflight.actionId, { acknowledgedAt: 1 });
    expect(j2.get(inflight.actionId)?.progressJson).toBe("{\"acknowledgedAt\":1}");
    j2.settle(inflight.actionId, { proof: "x" }, "reconciled");
    expect(j2.hasUnresolved("p1")).toBe(false);
    second.close();
  });

  it("imports the per-agent journal of older versions without losing unresolved entries", async () => {
    const { importLegacyJournal } = await import("./legacy-journal.js");
    const agentDb = openAgentDb(join(dir, "agent.db"));
    agentDb.db.insert(legacyActions).values({
      actionId: "00000000-0000-4000-8000-000000000001",
      physicalId: "p9",
      serial: "s",
      kind: "setprop",
      requestSha256: "x",
      requestJson: "{}",
      state: "unknown",
      dispatched: null,
      ambiguous: true,
      bootId: "b",
      createdAt: 1,
      deadlineAt: 2,
      size: 600,
    }).run();
    const host = openHostJournalDb(dir);
    const j = new OwnershipJournal(host.db, host.sqlite);
    expect(importLegacyJournal(agentDb, j, "agent-old")).toBe(1);
    expect(j.unresolved("p9").map((a) => [a.state, a.agentId])).toEqual([["unknown", "agent-old"]]);
    expect(agentDb.db.select().from(legacyActions).all()).toEqual([]);
    expect(importLegacyJournal(agentDb, j, "agent-old")).toBe(0);
    host.close();
    agentDb.close();
  });

  it("bounds settled history per device and never drops unresolved actions", () => {
    const db = openHostJournalDb(dir);
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

  it("prunes in batches: at the bound, most actions delete nothing", () => {
    // Pruning reads and recounts the device's history; doing it on every action at the bound made each cost a scan of thousands of rows.
    const db = openHostJournalDb(dir);
    const j = new OwnershipJournal(db.db, db.sqlite, 256 * 1024);
    const pad = "x".repeat(2000);
    const count = db.sqlite.prepare("SELECT count(*) AS n FROM actions WHERE physical_id = 'p1'");
    const rows = () => (count.get() as { n: number }).n;
    let prunes = 0;
    for (let i = 1; i <= 300; i++) {
      const before = rows();
      j.settle(j.begin(action("p1", i, pad)).actionId, { exitCode: 0 }, "completed");
      if (rows() <= before) prunes++;
    }
    // About 100 entries fill the bound; the 200 after it pruned a tenth of it at a time.
    expect(prunes).toBeGreaterThan(0);
    expect(prunes).toBeLessThanOrEqual(25);
    const kept = j.recent("p1", 1000);
    expect(kept.reduce((n, a) => n + a.size, 0)).toBeLessThanOrEqual(256 * 1024);
    expect(kept[0]?.requestJson).toContain("echo 300");
    db.close();
  });
});
