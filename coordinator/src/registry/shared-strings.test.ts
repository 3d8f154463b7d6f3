import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { DevicePropertiesSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { SharedStrings } from "./shared-strings.js";

describe("SharedStrings", () => {
  it("gives back the first copy of an equal value, and keeps the value itself", () => {
    const t = new SharedStrings();
    const a = t.share(["Pix", "el 7"].join(""));
    const b = t.share(["Pi", "xel 7"].join(""));
    expect(a).toBe("Pixel 7");
    expect(b).toBe("Pixel 7");
    // One kept copy for both (equal strings cannot be told apart by identity in JavaScript; the table's size can).
    expect(t.size).toBe(1);
  });

  it("does not keep values over its length limit", () => {
    const t = new SharedStrings(10, 4);
    expect(t.share("12345")).toBe("12345");
    expect(t.size).toBe(0);
  });

  it("starts over when full, so it never holds more than its bound", () => {
    const t = new SharedStrings(3);
    for (const s of ["a", "b", "c", "d", "e"]) t.share(s);
    expect(t.size).toBeLessThanOrEqual(3);
    expect(t.share("e")).toBe("e");
  });

  it("shares the fleet-wide properties and leaves each phone's identity as it is", () => {
    const t = new SharedStrings();
    const mk = (n: number) =>
      create(DevicePropertiesSchema, { model: "Pixel 7", manufacturer: "Google", androidVersion: "14", abi: "arm64-v8a", identityStatus: "ok", serialno: `SN${n}`, bootId: `b${n}`, physicalId: `pd-${n}`, apiLevel: 34 });
    const p1 = t.shareProperties(mk(1));
    const p2 = t.shareProperties(mk(2));
    expect(p2).toEqual(mk(2));
    expect(p1).toEqual(mk(1));
    // Five fleet-wide values and the empty platform; none of the identity fields.
    expect(t.size).toBe(6);
  });
});
