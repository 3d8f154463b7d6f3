import { describe, expect, it } from "vitest";
import { appCommand, parsePackages } from "./app-packages.js";

describe("the Apps tab's package commands", () => {
  it("reads package names from pm's output, sorted, skipping what is not one", () => {
    const out = "package:com.example.b\npackage:com.example.a\r\nWARNING: linker: something\npackage:bad;rm -rf /\npackage:nodots\n\npackage:com.example.a\n";
    expect(parsePackages(out)).toEqual(["com.example.a", "com.example.b"]);
  });

  it("builds launch, stop and uninstall commands, and refuses a name that is not a package's", () => {
    expect(appCommand("launch", "com.example.hello")).toBe("monkey -p com.example.hello -c android.intent.category.LAUNCHER 1");
    expect(appCommand("stop", "com.example.hello")).toBe("am force-stop com.example.hello");
    expect(appCommand("uninstall", "com.example.hello")).toBe("pm uninstall com.example.hello");
    expect(() => appCommand("uninstall", "com.example.x; reboot")).toThrow(/not a package name/);
  });
});
