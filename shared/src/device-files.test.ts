import { describe, expect, it } from "vitest";
import { checkDeviceFilePath } from "./device-files.js";
import { toErrorReport } from "./errors.js";

const refusal = (path: string) => {
  try {
    checkDeviceFilePath(path);
  } catch (err) {
    return toErrorReport(err);
  }
  return undefined;
};

describe("phone file paths (PushFile, PullFile)", () => {
  it("takes a file under /sdcard/Download/, nested or not", () => {
    expect(checkDeviceFilePath("/sdcard/Download/report (1).txt")).toBe("/sdcard/Download/report (1).txt");
    expect(checkDeviceFilePath("/sdcard/Download/a/b.bin")).toBe("/sdcard/Download/a/b.bin");
  });

  it("refuses, naming the field, a path that climbs out, lies elsewhere, names the directory itself or holds what a shell would read", () => {
    for (const p of [
      "/sdcard/Download/../x",
      "/sdcard/Download/a/./b",
      "/sdcard/Download/",
      "/sdcard/Download//x",
      "/data/local/tmp/x",
      "/sdcard/Downloads/x",
      "sdcard/Download/x",
      "/sdcard/Download/a;rm x",
      "/sdcard/Download/$(id)",
      "/sdcard/Download/a\nb",
      "",
    ]) {
      expect(refusal(p), p).toMatchObject({ code: "INVALID_ARGUMENT", field: "path", dispatched: false });
    }
    expect(refusal(`/sdcard/Download/${"a".repeat(600)}`)).toMatchObject({ code: "INVALID_ARGUMENT", field: "path" });
  });
});
