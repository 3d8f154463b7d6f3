import { create } from "@bufbuild/protobuf";
import { LogLineSchema } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { describe, expect, it } from "vitest";
import { packageOfProcess, parseProcesses, PidPackages, PS_MIN_INTERVAL_MS } from "./pid-packages.js";

const line = (pid: number) => create(LogLineSchema, { pid, level: "I", tag: "t", message: "m" });
const signal = new AbortController().signal;

describe("pid → package", () => {
  it("reads toybox ps output: app processes by package (a second process of an app too), daemons and system_server as none", () => {
    const ps = "  PID NAME\n    1 init\n  612 /system/bin/surfaceflinger\n  900 system_server\n 4242 com.example.demo\n 4300 com.example.demo:remote\n 4400 zygote64\n";
    expect([...parseProcesses(ps)]).toEqual([[1, ""], [612, ""], [900, ""], [4242, "com.example.demo"], [4300, "com.example.demo"], [4400, ""]]);
    expect(packageOfProcess("android.process.acore")).toBe("android.process.acore");
    expect(packageOfProcess("kworker/0:1")).toBe("");
  });

  it("reads the process list again only for a pid not seen before, at most once per interval; a pid gone before it was seen has no package", async () => {
    let now = 1_000;
    const reads: number[] = [];
    let table = "PID NAME\n10 com.a\n";
    const pids = new PidPackages(async () => {
      reads.push(now);
      return table;
    }, () => now);
    const first = [line(10), line(11)];
    await pids.label(first, signal);
    expect(first.map((l) => l.package)).toEqual(["com.a", ""]);
    // Known pids (11 included, as gone): no read.
    const again = [line(10), line(11)];
    await pids.label(again, signal);
    expect(reads.length).toBe(1);
    // A new app starts: its first line brings a read (waiting out the interval first).
    table = "PID NAME\n10 com.a\n12 com.b\n";
    now += PS_MIN_INTERVAL_MS;
    const next = [line(12)];
    await pids.label(next, signal);
    expect(next[0]?.package).toBe("com.b");
    expect(reads).toEqual([1_000, 1_000 + PS_MIN_INTERVAL_MS]);
  });

  it("leaves lines without a package when the phone cannot say, and tries again at the next new pid", async () => {
    let fail = true;
    const pids = new PidPackages(async () => {
      if (fail) throw new Error("device offline");
      return "PID NAME\n20 com.c\n";
    }, () => 0);
    const lines = [line(20)];
    await pids.label(lines, signal);
    expect(lines[0]?.package).toBe("");
    fail = false;
    const later = [line(21), line(20)];
    await pids.label(later, signal);
    expect(later.map((l) => l.package)).toEqual(["", "com.c"]);
  });
});
