import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { LogLineSchema } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { lineText, LogRing, matches } from "./log-ring.js";

const line = (level: string, tag: string, message: string) => create(LogLineSchema, { time: "12-07 08:00:00.000", pid: 12, tid: 13, level, tag, message });

describe("the Logs tab's ring and filters", () => {
  it("keeps the newest lines and counts what it let go", () => {
    const ring = new LogRing(3);
    expect(ring.push([line("I", "a", "1"), line("I", "a", "2")])).toBe(0);
    expect(ring.push([line("I", "a", "3"), line("I", "a", "4")])).toBe(1);
    expect(ring.all().map((l) => l.message)).toEqual(["2", "3", "4"]);
    expect(ring.evicted).toBe(1);
  });

  it("filters by lowest level, part of the tag and a search of tag and message", () => {
    const all = { level: "V", tag: "", package: "", search: "" };
    expect(matches(line("D", "ActivityManager", "x"), { ...all, level: "I" })).toBe(false);
    expect(matches(line("E", "ActivityManager", "x"), { ...all, level: "W" })).toBe(true);
    expect(matches(line("I", "ActivityManager", "x"), { ...all, tag: "activity" })).toBe(true);
    expect(matches(line("I", "init", "x"), { ...all, tag: "activity" })).toBe(false);
    expect(matches(line("I", "init", "Hello World"), { ...all, search: "world" })).toBe(true);
    expect(matches(line("I", "init", "Hello"), { ...all, search: "world" })).toBe(false);
    // A banner has no level: no level filter hides it.
    expect(matches(create(LogLineSchema, { message: "--------- beginning of main" }), { ...all, level: "F" })).toBe(true);
  });

  it("prints a line as logcat did", () => {
    expect(lineText(line("W", "t", "m"))).toBe("12-07 08:00:00.000    12    13 W t: m");
  });

  it("filters by part of the package the agent told from the line's pid; a line of no package is hidden by any package filter", () => {
    const all = { level: "V", tag: "", package: "", search: "" };
    const app = create(LogLineSchema, { pid: 4242, level: "I", tag: "e.example.demo", message: "Late-enabling -Xcheck:jni", package: "com.example.demo" });
    const daemon = create(LogLineSchema, { pid: 612, level: "I", tag: "SurfaceFlinger", message: "frame", package: "" });
    expect(matches(app, { ...all, package: "example.DEMO" })).toBe(true);
    expect(matches(app, { ...all, package: "com.other" })).toBe(false);
    expect(matches(daemon, { ...all, package: "com.example.demo" })).toBe(false);
    expect(matches(daemon, all)).toBe(true);
  });
});
