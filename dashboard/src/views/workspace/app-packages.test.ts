import { describe, expect, it } from "vitest";
import { appCommand } from "./app-packages.js";

describe("the Apps tab's package commands", () => {
  it("builds launch, stop and uninstall commands, and refuses a name that is not a package's", () => {
    expect(appCommand("launch", "com.example.hello")).toBe("monkey -p com.example.hello -c android.intent.category.LAUNCHER 1");
    expect(appCommand("stop", "com.example.hello")).toBe("am force-stop com.example.hello");
    expect(appCommand("uninstall", "com.example.hello")).toBe("pm uninstall com.example.hello");
    expect(() => appCommand("uninstall", "com.example.x; reboot")).toThrow(/not a package name/);
  });
});
