import { describe, expect, it } from "vitest";
import { toErrorReport } from "../errors.js";
import { parseCleanupPolicy } from "./cleanup-policy.js";

function refusal(text: string, path?: string): { code: string; field?: string; message: string } {
  try {
    parseCleanupPolicy(text, path);
  } catch (err) {
    const r = toErrorReport(err);
    return { code: r.code, message: r.message, ...("field" in r && r.field ? { field: r.field } : {}) };
  }
  throw new Error("accepted");
}

describe("parseCleanupPolicy", () => {
  it("reads a full policy, with defaults for what it leaves out", () => {
    const p = parseCleanupPolicy(`
version: 1
timeoutSeconds: 60
keepPackages: [com.example.keep]
clearData: [com.android.chrome]
removeNewFilesUnder: [/sdcard/Download/, /sdcard/Pictures]
settings:
  system:
    screen_off_timeout: 60000
  global:
    stay_on_while_plugged_in: "0"
`);
    expect(p).toEqual({
      timeoutMs: 60_000,
      uninstallInstalled: true,
      keepPackages: ["com.example.keep"],
      clearData: ["com.android.chrome"],
      removeNewFilesUnder: ["/sdcard/Download", "/sdcard/Pictures"],
      settings: [
        { namespace: "system", key: "screen_off_timeout", value: "60000" },
        { namespace: "global", key: "stay_on_while_plugged_in", value: "0" },
      ],
      airplaneModeOff: true,
      pressHome: true,
    });
    expect(parseCleanupPolicy("version: 1\npressHome: false\nairplaneModeOff: false\nuninstallInstalled: false")).toMatchObject({ pressHome: false, airplaneModeOff: false, uninstallInstalled: false, timeoutMs: 120_000 });
  });

  it("reads JSON for a .json path", () => {
    expect(parseCleanupPolicy(`{"version": 1, "clearData": ["com.a.b"]}`, "p.json").clearData).toEqual(["com.a.b"]);
  });

  it.each([
    ["version: 2", "version"],
    ["clearData: [x]", "version"],
    ["version: 1\nremoveNewFiles: [/sdcard]", "removeNewFiles"],
    ["version: 1\nclearData: [not a package]", "clearData[0]"],
    ["version: 1\nclearData: com.a.b", "clearData"],
    ["version: 1\nremoveNewFilesUnder: [sdcard/Download]", "removeNewFilesUnder[0]"],
    ["version: 1\nremoveNewFilesUnder: [/]", "removeNewFilesUnder[0]"],
    ["version: 1\nremoveNewFilesUnder: [/sdcard/../data]", "removeNewFilesUnder[0]"],
    ["version: 1\nsettings: {vendor: {a: 1}}", "settings.vendor"],
    ["version: 1\nsettings: {system: {'a b': 1}}", "settings.system.a b"],
    ["version: 1\nsettings: {system: {a: [1]}}", "settings.system.a"],
    ["version: 1\ntimeoutSeconds: 1", "timeoutSeconds"],
    ["version: 1\npressHome: yes", "pressHome"],
    ["- 1", "(file)"],
  ])("refuses %j naming %s", (text, field) => {
    const r = refusal(text);
    expect(r.code).toBe("CLEANUP_POLICY_INVALID");
    expect(r.field).toBe(field);
    expect(r.message).toContain(field);
  });

  it("refuses YAML that does not parse, with its line", () => {
    const r = refusal("version: 1\nclearData: [a\n");
    expect(r.code).toBe("CLEANUP_POLICY_INVALID");
    expect(r.message).toMatch(/line \d+/);
  });
});
