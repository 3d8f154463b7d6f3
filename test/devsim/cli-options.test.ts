import { describe, expect, it } from "vitest";
import { parseCliOptions } from "./cli-options.js";

describe("devsim CLI options", () => {
  it("defaults: one device, adb port from the environment, json when piped", () => {
    expect(parseCliOptions([], { ANDROID_ADB_SERVER_PORT: "6123" })).toEqual({
      devices: 1,
      adbPort: 6123,
      host: "127.0.0.1",
      connect: true,
      format: "json",
      help: false,
    });
    expect(parseCliOptions([], {}).adbPort).toBe(5037);
    expect(parseCliOptions([], {}, true).format).toBe("table");
  });

  it("parses flags", () => {
    expect(parseCliOptions(["--devices", "3", "--adb-port", "7000", "--no-connect", "--format", "table"], {})).toMatchObject({
      devices: 3,
      adbPort: 7000,
      connect: false,
      format: "table",
    });
    expect(parseCliOptions(["-h"], {}).help).toBe(true);
  });

  it("rejects bad input", () => {
    expect(() => parseCliOptions(["--devices", "0"], {})).toThrow(/positive integer/);
    expect(() => parseCliOptions(["--format", "xml"], {})).toThrow(/json or table/);
    expect(() => parseCliOptions(["--bogus"], {})).toThrow();
  });
});
