import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { EvidenceGrants, type UploadClaim } from "./evidence-grants.js";
import { type EvidenceIndexStore } from "./evidence-index-store.js";
import { createEvidenceGrantStore, createEvidenceIndexStore } from "../db/stores.js";

const refused = (p: Promise<unknown>): Promise<ErrorReport | null> => p.then(() => null, (err: unknown) => toErrorReport(err));

describe.each(dialects)("evidence grants on %s", (dialect) => {
  let database: FarmDatabase;
  let grants: EvidenceGrants;
  let index: EvidenceIndexStore;
  beforeEach(async () => {
    database = await openTestDatabase(dialect);
    grants = new EvidenceGrants(createEvidenceGrantStore(database));
    index = createEvidenceIndexStore(database);
  });
  afterEach(() => database.close());

  const issue = (requestedBy = "alice", kind: "still" | "video" = "still") => grants.issue({ kind, agentId: "a1", agentToken: "agent-1", serial: "s1", physicalId: "p1", requestedBy });
  const claimOf = (g: { evidenceId: string; kind: string }): UploadClaim => ({ evidenceId: g.evidenceId, agentId: "a1", serial: "s1", physicalId: "p1", kind: g.kind });
  const stored = (evidenceId: string, totalBytes: number) =>
    index.insert({ evidenceId, kind: "still", status: "complete", label: null, serial: "s1", physicalId: "p1", agentId: "a1", createdAt: Date.now(), totalBytes, manifestSha256: "0".repeat(64) });

  it("stores what it issues, and gives it back as issued", async () => {
    const before = Date.now();
    const g = await issue("alice", "video");
    expect(g.evidenceId).toMatch(/^[0-9a-f-]{36}$/);
    expect(g.issuedAt).toBeGreaterThanOrEqual(before);
    expect(await grants.get(g.evidenceId)).toEqual(g);
    expect(await grants.get(randomUUID())).toBeUndefined();
  });

  it("accepts an upload only from the agent, token and device it was issued to, for its kind", async () => {
    const g = await issue();
    expect(await grants.authorize(claimOf(g), "agent-1")).toEqual(g);
    const cases: [Partial<UploadClaim>, string, string][] = [
      [{ evidenceId: randomUUID() }, "agent-1", "evidence_id"],
      [{}, "agent-2", "agent_id"],
      [{ agentId: "a2" }, "agent-1", "agent_id"],
      [{ serial: "s2" }, "agent-1", "serial"],
      [{ physicalId: "p2" }, "agent-1", "serial"],
      [{ kind: "video" }, "agent-1", "kind"],
    ];
    for (const [change, token, field] of cases) {
      expect(await refused(grants.authorize({ ...claimOf(g), ...change }, token)), JSON.stringify(change)).toMatchObject({ code: "EVIDENCE_NOT_ISSUED", field });
    }
  });

  it("sums the stored bytes of each user's grants, and nothing else", async () => {
    expect(await grants.storedBytes("alice")).toBe(0);
    const a1 = await issue("alice");
    const a2 = await issue("alice", "video");
    const b1 = await issue("bob");
    await issue("alice"); // issued, never uploaded: counts nothing
    // Above 2^32: bytes are 64-bit in both dialects.
    await stored(a1.evidenceId, 5_000_000_000);
    await stored(a2.evidenceId, 7);
    await stored(b1.evidenceId, 11);
    await stored(randomUUID(), 13); // a bundle no grant names
    expect(await grants.storedBytes("alice")).toBe(5_000_000_007);
    expect(await grants.storedBytes("bob")).toBe(11);
    expect(await grants.storedBytes("carol")).toBe(0);
  });

  it("never issues one id twice", async () => {
    const g = await issue();
    await expect(createEvidenceGrantStore(database).insert({ ...g, requestedBy: "mallory" })).rejects.toThrow();
    expect(await grants.get(g.evidenceId)).toEqual(g);
  });
});
