import { describe, expect, it } from "vitest";
import { parsePackageList } from "./package-list.js";

describe("pm list packages output", () => {
  it("gives the package names, sorted and once each, skipping warnings and what is not a package name", () => {
    const out = "package:com.example.b\npackage:com.example.a\r\nWARNING: linker: something\npackage:bad;rm\npackage:nodots\n\npackage:com.example.a\n";
    expect(parsePackageList(out)).toEqual(["com.example.a", "com.example.b"]);
    expect(parsePackageList("")).toEqual([]);
  });
});
