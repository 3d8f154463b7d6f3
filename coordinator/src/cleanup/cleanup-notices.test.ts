import { describe, expect, it } from "vitest";
import { cleanupNoticeOf } from "./cleanup-notices.js";

describe("a cleanup notice from another replica", () => {
  it("is taken field by field; anything of another shape is not one (the receiver then re-reads the stored rows)", () => {
    const n = { physicalId: "pd-a", state: "needs-attention", leaseId: "l-1", reason: "home failed", since: 5 };
    expect(cleanupNoticeOf({ ...n, baseline: "{\"packages\":[]}" })).toEqual(n);
    expect(cleanupNoticeOf({ ...n, state: "none" })).toMatchObject({ state: "none" });
    expect(cleanupNoticeOf({ ...n, state: "gone" })).toBeUndefined();
    expect(cleanupNoticeOf({ ...n, since: "5" })).toBeUndefined();
    expect(cleanupNoticeOf({ ...n, reason: "x".repeat(2_001) })).toBeUndefined();
    expect(cleanupNoticeOf(null)).toBeUndefined();
    expect(cleanupNoticeOf("pd-a")).toBeUndefined();
  });
});
