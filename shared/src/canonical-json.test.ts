import { describe, expect, it } from "vitest";
import { canonicalJson } from "./canonical-json.js";

describe("canonicalJson", () => {
  it("sorts keys at every level and spells bytes, bigints and type markers stably", () => {
    expect(canonicalJson({ b: 1, a: { d: 2, c: 3 } })).toBe("{\"a\":{\"c\":3,\"d\":2},\"b\":1}");
    expect(canonicalJson({ $typeName: "x.Y", n: 5n, raw: new Uint8Array([1, 2]) })).toBe("{\"n\":\"5\",\"raw\":\"AQI=\"}");
  });
});
