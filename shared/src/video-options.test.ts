import { describe, expect, it } from "vitest";
import { checkVideoAspect, defaultVideoSize, orientedDisplay, parseVideoSize, validateDurationSeconds } from "./video-options.js";

const fieldOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return (err as { details?: { value?: { field?: string } }[] }).details?.[0]?.value?.field ?? "thrown";
  }
  return "accepted";
};

describe("video options", () => {
  it("takes integer durations from 1 to 180 only", () => {
    expect(validateDurationSeconds("1")).toBe(1);
    expect(validateDurationSeconds(180)).toBe(180);
    for (const bad of ["0", "181", "1.5", "-3", "ten", "", undefined]) expect(fieldOf(() => validateDurationSeconds(bad))).toBe("duration-seconds");
  });

  it("takes positive even sizes only", () => {
    expect(parseVideoSize("720x1280")).toEqual({ width: 720, height: 1280 });
    expect(parseVideoSize(undefined)).toBeUndefined();
    for (const bad of ["721x1280", "720x0", "720", "x", "720X1280", "-720x1280"]) expect(fieldOf(() => parseVideoSize(bad))).toBe("size");
  });

  it("scales the display to a long edge of at most 1280, rounded down to even", () => {
    expect(defaultVideoSize({ width: 1080, height: 2400 })).toEqual({ width: 576, height: 1280 });
    expect(defaultVideoSize({ width: 1440, height: 3120 })).toEqual({ width: 590, height: 1280 });
    expect(defaultVideoSize({ width: 720, height: 1280 })).toEqual({ width: 720, height: 1280 });
    expect(defaultVideoSize({ width: 481, height: 803 })).toEqual({ width: 480, height: 802 });
    expect(orientedDisplay({ width: 1080, height: 2400 }, 1)).toEqual({ width: 2400, height: 1080 });
  });

  it("allows 1% aspect difference and no more", () => {
    expect(fieldOf(() => checkVideoAspect({ width: 540, height: 1200 }, { width: 1080, height: 2400 }))).toBe("accepted");
    expect(fieldOf(() => checkVideoAspect({ width: 544, height: 1200 }, { width: 1080, height: 2400 }))).toBe("accepted");
    expect(fieldOf(() => checkVideoAspect({ width: 546, height: 1200 }, { width: 1080, height: 2400 }))).toBe("size");
    expect(fieldOf(() => checkVideoAspect({ width: 720, height: 1280 }, { width: 1080, height: 2400 }))).toBe("size");
    expect(fieldOf(() => checkVideoAspect({ width: 1200, height: 540 }, { width: 1080, height: 2400 }))).toBe("size");
  });
});
