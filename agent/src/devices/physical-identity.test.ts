import { describe, expect, it } from "vitest";
import { findDuplicateIdentities, physicalIdOf } from "./physical-identity.js";

const pixel = { "ro.serialno": "R58M12", "ro.product.manufacturer": "Google", "ro.product.model": "Pixel 7", "ro.product.device": "panther", "ro.product.name": "panther" };

describe("physical identity", () => {
  it("depends on hardware identity only, and on a pin", () => {
    expect(physicalIdOf(pixel)).toBe(physicalIdOf({ ...pixel, "ro.build.version.sdk": "34" }));
    expect(physicalIdOf(pixel)).not.toBe(physicalIdOf({ ...pixel, "ro.serialno": "R58M13" }));
    expect(physicalIdOf({ ...pixel, "ro.serialno": "", "ro.boot.serialno": "R58M12" })).toBe(physicalIdOf(pixel));
    expect(physicalIdOf(pixel, "bench-left")).not.toBe(physicalIdOf(pixel));
    expect(physicalIdOf(pixel)).toMatch(/^pd-[0-9a-f]{24}$/);
  });

  it("flags serials whose shared identity shows two boot ids", () => {
    const dup = findDuplicateIdentities([
      { serial: "a", physicalId: "p1", bootId: "b1" },
      { serial: "b", physicalId: "p1", bootId: "b2" },
      { serial: "c", physicalId: "p2", bootId: "b3" },
      { serial: "d", physicalId: "p2", bootId: "b3" },
      { serial: "e", physicalId: "p3", bootId: "" },
    ]);
    expect([...dup].sort()).toEqual(["a", "b"]);
  });
});
