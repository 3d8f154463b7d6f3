import { describe, expect, it } from "vitest";
import { countdown, renewalTtl } from "./lease-time.js";

describe("lease time on the workspace", () => {
  it("counts down in minutes and seconds, hours when long, and never below zero", () => {
    expect(countdown(29 * 60_000 + 58_400)).toBe("29:58");
    expect(countdown(3_723_000)).toBe("1:02:03");
    expect(countdown(-5_000)).toBe("0:00");
  });

  it("renews so the lease ends the asked-for time later than now, within 1 s..24 h", () => {
    const now = 1_000_000;
    expect(renewalTtl(now + 10 * 60_000, now, 15 * 60_000)).toBe(25 * 60_000);
    // Already past (the expiry event not here yet): counts from now.
    expect(renewalTtl(now - 5_000, now, 15 * 60_000)).toBe(15 * 60_000 + 1_000);
    expect(renewalTtl(now + 24 * 3_600_000, now, 30 * 60_000)).toBe(24 * 3_600_000);
  });
});
