import { create } from "@bufbuild/protobuf";
import { LogLineSchema, WatchLogcatResponseSchema, type WatchLogcatResponse } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { describe, expect, it } from "vitest";
import { logcatFilter, logcatLines } from "./logcat-lines.js";

const line = (level: string, tag: string, message: string, pkg = "") => create(LogLineSchema, { level, tag, message, package: pkg });

describe("logcatFilter", () => {
  it("keeps the given level and above, lines of no level, the given tags and package", () => {
    const keep = logcatFilter({ level: "W", tag: ["a", "b"], package: "com.x" });
    expect(keep(line("W", "a", "", "com.x"))).toBe(true);
    expect(keep(line("E", "b", "", "com.x"))).toBe(true);
    expect(keep(line("", "a", "banner", "com.x"))).toBe(true);
    expect(keep(line("I", "a", "", "com.x"))).toBe(false);
    expect(keep(line("W", "c", "", "com.x"))).toBe(false);
    expect(keep(line("W", "a", "", ""))).toBe(false);
    expect(logcatFilter({})(line("V", "any", ""))).toBe(true);
  });

  it("refuses bad options with the field", () => {
    expect(() => logcatFilter({ level: "Q" as "V" })).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT", field: "level" }));
    expect(() => logcatFilter({ tag: [] })).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT", field: "tag" }));
    expect(() => logcatFilter({ package: "" })).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT", field: "package" }));
  });
});

describe("logcatLines", () => {
  it("yields batches line by line, reading the next batch only when asked, and carries dropped counts to the next line kept", async () => {
    let read = 0;
    const batches: WatchLogcatResponse[] = [
      create(WatchLogcatResponseSchema, { lines: [line("I", "t", "1"), line("I", "u", "skip")] }),
      create(WatchLogcatResponseSchema, { dropped: 5, lines: [line("I", "u", "skip"), line("I", "t", "2")] }),
    ];
    const open = async function* () {
      for (const b of batches) {
        read++;
        yield b;
      }
    };
    const it = logcatLines(open, (l) => l.tag === "t", undefined);
    expect((await it.next()).value).toMatchObject({ message: "1", droppedBefore: 0 });
    expect(read).toBe(1);
    expect((await it.next()).value).toMatchObject({ message: "2", droppedBefore: 5 });
    expect((await it.next()).done).toBe(true);
  });

  it("ends quietly on its caller's abort and throws a FarmError otherwise", async () => {
    const abort = new AbortController();
    const failing = async function* (): AsyncGenerator<WatchLogcatResponse> {
      abort.abort();
      throw new Error("stream reset");
    };
    expect((await logcatLines(failing, () => true, abort.signal).next()).done).toBe(true);
    await expect(logcatLines(failing, () => true, undefined).next()).rejects.toMatchObject({ name: "FarmError", code: "INTERNAL" });
  });
});
