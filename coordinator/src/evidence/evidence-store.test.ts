import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase } from "../db/open-database.js";
import { evidence } from "../db/schema.js";
import { EvidenceStore, type EvidenceRow } from "./evidence-store.js";
import { refusal } from "@farm/shared/testing/refusal";

const opened = openDatabase(":memory:");
// Listing reads only the index; nothing here touches the directory.
const store = new EvidenceStore(opened.db, tmpdir());
afterAll(() => opened.close());

const T = 1_700_000_000_000;
function index(createdAt: number, more: Partial<EvidenceRow> = {}): EvidenceRow {
  const row: EvidenceRow = { evidenceId: randomUUID(), kind: "still", status: "complete", label: null, serial: "s1", physicalId: "p1", agentId: "a1", createdAt, totalBytes: 1, manifestSha256: "0".repeat(64), ...more };
  opened.db.insert(evidence).values(row).run();
  return row;
}

type Filter = Parameters<EvidenceStore["listPage"]>[0];
function readAll(filter: Filter, pageSize: number, between?: (page: number) => void): { ids: string[]; pages: number } {
  const ids: string[] = [];
  let token = "";
  let pages = 0;
  do {
    const p = store.listPage(filter, { pageSize, pageToken: token });
    ids.push(...p.items.map((r) => r.evidenceId));
    token = p.nextPageToken;
    pages++;
    between?.(pages);
  } while (token);
  return { ids, pages };
}

describe("evidence pages", () => {
  // Bundles published in the same millisecond are common (a burst of captures).
  const same = Array.from({ length: 5 }, () => index(T));
  const older = index(T - 1000);
  const newer = index(T + 1000);
  const failed = Array.from({ length: 3 }, (_, i) => index(T + i, { status: "failed", serial: "s2", label: "nightly" }));

  it("orders by (created, id) newest first, and pages through equal times without gaps or repeats", () => {
    const expected = [...failed, newer, ...same, older]
      .sort((a, b) => b.createdAt - a.createdAt || (a.evidenceId < b.evidenceId ? 1 : -1))
      .map((r) => r.evidenceId);
    expect(store.listPage({}, { pageSize: 0, pageToken: "" }).items.map((r) => r.evidenceId)).toEqual(expected);
    for (const size of [1, 2, 3, 4]) {
      const { ids, pages } = readAll({}, size);
      expect(ids, `page size ${size}`).toEqual(expected);
      expect(pages).toBe(Math.ceil(expected.length / size));
    }
  });

  it("returns every bundle that was there once, even when new ones are published between reads", () => {
    const before = store.listPage({ serial: "s1" }, { pageSize: 1000, pageToken: "" }).items.map((r) => r.evidenceId);
    const added: string[] = [];
    const { ids } = readAll({ serial: "s1" }, 2, () => {
      // Newer bundles, including one in the millisecond the pages are at.
      added.push(index(T + 5000).evidenceId, index(T).evidenceId);
    });
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of before) expect(ids).toContain(id);
    expect(ids.filter((id) => !added.includes(id))).toEqual(before);
  });

  it("applies the filters on every page and binds the token to them", () => {
    const first = store.listPage({ status: "failed", label: "nightly" }, { pageSize: 2, pageToken: "" });
    expect(first.items).toHaveLength(2);
    expect(first.items.every((r) => r.status === "failed")).toBe(true);
    const rest = store.listPage({ status: "failed", label: "nightly" }, { pageSize: 2, pageToken: first.nextPageToken });
    expect(rest.items.map((r) => r.status)).toEqual(["failed"]);
    expect(rest.nextPageToken).toBe("");
    for (const other of [{ status: "complete", label: "nightly" }, { status: "failed" }, { status: "failed", label: "nightly", serial: "s2" }]) {
      expect(refusal(() => store.listPage(other, { pageSize: 2, pageToken: first.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    }
    // Empty strings (what an unset proto field reads as) are no filter, so the token still fits.
    expect(store.listPage({ status: "failed", label: "nightly", serial: "" }, { pageSize: 2, pageToken: first.nextPageToken }).items).toHaveLength(1);
  });

  it("refuses a token from another list and a malformed one", () => {
    const videoLike = Buffer.from(JSON.stringify({ v: 1, f: "x", k: [T, "id"] })).toString("base64url");
    expect(refusal(() => store.listPage({}, { pageSize: 2, pageToken: videoLike }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => store.listPage({}, { pageSize: 2, pageToken: "!!" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
  });
});
