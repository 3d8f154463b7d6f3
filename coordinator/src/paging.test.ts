import { describe, expect, it } from "vitest";
import { decodePageToken, DEFAULT_PAGE_SIZE, encodePageToken, MAX_PAGE_SIZE, pageSizeOf, readPage, type PageScope } from "./paging.js";
import { refusal } from "@farm/shared/testing/refusal";

const scope: PageScope = { list: "things", filter: { serial: "s1", status: "" } };
const shape = ["number", "string"] as const;

describe("page size", () => {
  it("reads 0 as the default, clamps to the maximum, refuses negatives on page_size", () => {
    expect(pageSizeOf(0)).toBe(DEFAULT_PAGE_SIZE);
    expect(DEFAULT_PAGE_SIZE).toBe(100);
    expect(pageSizeOf(1)).toBe(1);
    expect(pageSizeOf(MAX_PAGE_SIZE)).toBe(1000);
    expect(pageSizeOf(MAX_PAGE_SIZE + 1)).toBe(1000);
    expect(pageSizeOf(4_294_967_295)).toBe(1000);
    expect(refusal(() => pageSizeOf(-1))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
  });
});

describe("page tokens", () => {
  it("round-trip the key, and are opaque base64url", () => {
    const token = encodePageToken(scope, [1700000000000, "b-id"] as const);
    expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(token).not.toContain("b-id");
    expect(decodePageToken(token, scope, shape)).toEqual([1700000000000, "b-id"]);
    expect(decodePageToken("", scope, shape)).toBeUndefined();
  });

  it("treat an empty filter value as no filter", () => {
    const token = encodePageToken(scope, [1, "a"] as const);
    expect(decodePageToken(token, { list: "things", filter: { serial: "s1" } }, shape)).toEqual([1, "a"]);
    expect(decodePageToken(token, { list: "things", filter: { serial: "s1", status: undefined } }, shape)).toEqual([1, "a"]);
  });

  it("are refused with other filters or on another list", () => {
    const token = encodePageToken(scope, [1, "a"] as const);
    for (const other of [{ list: "things", filter: { serial: "s2" } }, { list: "things", filter: { serial: "s1", status: "failed" } }, { list: "things" }, { list: "others", filter: { serial: "s1" } }]) {
      const r = refusal(() => decodePageToken(token, other, shape));
      expect(r).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
      expect(r?.message).toMatch(/other filters/);
    }
  });

  it("refuse malformed tokens on page_token", () => {
    const good = encodePageToken(scope, [1, "a"] as const);
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const fp = (JSON.parse(Buffer.from(good, "base64url").toString()) as { f: string }).f;
    const bad = [
      "not a token!",
      "%%%",
      Buffer.from("not json").toString("base64url"),
      b64(null),
      b64([1, 2]),
      b64({ v: 2, f: fp, k: [1, "a"] }),
      b64({ v: 1, f: fp }),
      b64({ v: 1, f: fp, k: ["1", "a"] }),
      b64({ v: 1, f: fp, k: [1.5, "a"] }),
      b64({ v: 1, f: fp, k: [1] }),
      b64({ v: 1, f: fp, k: [1, "a", "extra"] }),
      good + "x".repeat(600),
    ];
    for (const token of bad) {
      expect(refusal(() => decodePageToken(token, scope, shape)), token).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    }
  });
});

describe("readPage", () => {
  // A sorted in-memory "table", read strictly after a key like the stores do.
  const rows = Array.from({ length: 7 }, (_, i) => ({ id: 7 - i }));
  const read = (after: readonly [number] | undefined, limit: number) => rows.filter((r) => after === undefined || r.id < after[0]).slice(0, limit);
  const page = (pageSize: number, pageToken: string) => readPage({ pageSize, pageToken }, { list: "t" }, ["number"] as const, (r: { id: number }) => [r.id] as const, read);

  it("pages to the end and ends with an empty token, never with an empty page", () => {
    const seen: number[] = [];
    const sizes: number[] = [];
    let token = "";
    do {
      const p = page(3, token);
      seen.push(...p.items.map((r) => r.id));
      sizes.push(p.items.length);
      token = p.nextPageToken;
    } while (token);
    expect(seen).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(sizes).toEqual([3, 3, 1]);
    // Exactly a page left: the page before it still says so, the last says end.
    expect(page(7, "").nextPageToken).toBe("");
    expect(page(6, "").nextPageToken).not.toBe("");
  });

  it("asks the store for one row more than the page, and at most the maximum page", () => {
    const limits: number[] = [];
    readPage({ pageSize: 5000, pageToken: "" }, { list: "t" }, ["number"] as const, (r: { id: number }) => [r.id] as const, (_after, limit) => {
      limits.push(limit);
      return [];
    });
    expect(limits).toEqual([MAX_PAGE_SIZE + 1]);
  });
});
