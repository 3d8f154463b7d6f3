import { describe, expect, it } from "vitest";
import { packagePage, parsePackageList } from "./package-list.js";

describe("pm list packages output", () => {
  it("gives the package names, sorted and once each, skipping warnings and what is not a package name", () => {
    const out = "package:com.example.b\npackage:com.example.a\r\nWARNING: linker: something\npackage:bad;rm\npackage:nodots\n\npackage:com.example.a\n";
    expect(parsePackageList(out)).toEqual(["com.example.a", "com.example.b"]);
    expect(parsePackageList("")).toEqual([]);
  });
});

describe("a page of packages", () => {
  const names = Array.from({ length: 5 }, (_, i) => `com.example.p${i}`);

  it("walks every name once, page after page, and ends with an empty token", () => {
    const seen: string[] = [];
    let token = "";
    let pages = 0;
    do {
      const page = packagePage(names, 2, token);
      seen.push(...page.packages);
      token = page.nextPageToken;
      pages++;
    } while (token !== "");
    expect(seen).toEqual(names);
    expect(pages).toBe(3);
    expect(packagePage(names, 0, "")).toEqual({ packages: names, nextPageToken: "" });
  });

  it("neither repeats nor hides a name when one is installed between two pages", () => {
    const first = packagePage(names, 2, "");
    const after = packagePage([...names, "com.example.a0"].sort(), 2, first.nextPageToken);
    expect(after.packages).toEqual(["com.example.p2", "com.example.p3"]);
  });

  it("refuses a token it did not issue", () => {
    expect(() => packagePage(names, 2, "not a token!")).toThrow(/page token/);
    expect(() => packagePage(names, 2, Buffer.from("../x").toString("base64url"))).toThrow(/page token/);
  });
});
