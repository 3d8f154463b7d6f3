import { describe, expect, it } from "vitest";
import { formatBytes, progressShown, TransferMeter } from "./progress.js";

describe("progress", () => {
  it("is shown only on a terminal, never with json output or in CI", () => {
    expect(progressShown("pretty", {}, true, 80)).toBe(true);
    expect(progressShown("wide", {}, true, 80)).toBe(true);
    expect(progressShown("json", {}, true, 80)).toBe(false);
    expect(progressShown("pretty", {}, false, 80)).toBe(false);
    expect(progressShown("pretty", { CI: "true" }, true, 80)).toBe(false);
    expect(progressShown("pretty", { TERM: "dumb" }, true, 80)).toBe(false);
    // A terminal without a size (`script`, some CI pseudo-terminals): no spinner to redraw forever.
    expect(progressShown("pretty", {}, true, 0)).toBe(false);
  });

  it("renders bytes and rate", () => {
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    const shown: string[] = [];
    const meter = new TransferMeter("pulling x", { update: (t) => shown.push(t), stop: () => undefined });
    meter.setTotal(2048);
    meter.add(1024);
    expect(shown.at(-1)).toMatch(/^pulling x: 1\.0 KiB of 2\.0 KiB at [\d.]+ (B|KiB|MiB|GiB)\/s$/);
  });
});
