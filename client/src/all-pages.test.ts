import { describe, expect, it } from "vitest";
import { allPages } from "./all-pages.js";

/** A fake List* call over 0..n-1, paged by position, recording what it was asked. */
function lister(n: number) {
  const asked: { pageSize: number; pageToken: string }[] = [];
  const fetch = (page: { pageSize: number; pageToken: string }) => {
    asked.push(page);
    const from = page.pageToken ? Number(page.pageToken) : 0;
    const size = Math.min(page.pageSize, 3); // a server whose pages are smaller than asked
    const items = Array.from({ length: Math.max(0, Math.min(size, n - from)) }, (_, i) => from + i);
    return Promise.resolve({ items, nextPageToken: from + size < n ? String(from + size) : "" });
  };
  return { asked, fetch };
}

describe("allPages", () => {
  it("follows next_page_token to the end", async () => {
    const l = lister(10);
    expect(await allPages(l.fetch)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(l.asked.map((a) => a.pageToken)).toEqual(["", "3", "6", "9"]);
    expect(l.asked[0]?.pageSize).toBe(1000);
  });

  it("stops at the limit and asks for no more than it still needs", async () => {
    const l = lister(10);
    expect(await allPages(l.fetch, { limit: 5 })).toEqual([0, 1, 2, 3, 4]);
    expect(l.asked).toEqual([
      { pageSize: 5, pageToken: "" },
      { pageSize: 2, pageToken: "3" },
    ]);
  });

  it("fails rather than loop when a server repeats a token", async () => {
    await expect(allPages(() => Promise.resolve({ items: [1], nextPageToken: "same" }))).rejects.toMatchObject({ code: "INTERNAL" });
  });
});
