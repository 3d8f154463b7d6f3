import { createRequire } from "node:module";
import { writeFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { controlRequest, runAction, setFaults, clearFaults } from "./control/control-client.js";
import { parseCliOptions } from "./cli-options.js";
import { DeviceLatency } from "./latency/device-latency.js";
import { LATENCY_PROFILES } from "./latency/latency-profiles.js";
import { runAdb, startAdbServer, startDevsim, type AdbServer, type Devsim } from "./index.js";

// Latency profiles: the delays they draw, and what a real adb client sees from a phone under one.

const require = createRequire(import.meta.url);
const { Adb } = require("@devicefarmer/adbkit") as typeof import("@devicefarmer/adbkit");

describe("DeviceLatency", () => {
  it("draws around the profile median and 90th percentile, the same sequence for the same seed", () => {
    const delay = LATENCY_PROFILES["pixel-usb"].shellOpenMs;
    const model = new DeviceLatency("pixel-usb", 7);
    const draws = Array.from({ length: 4000 }, () => model.draw("shellOpenMs")).sort((a, b) => a - b);
    expect(draws[2000]!).toBeGreaterThan(delay.medianMs * 0.93);
    expect(draws[2000]!).toBeLessThan(delay.medianMs * 1.07);
    expect(draws[3600]!).toBeGreaterThan(delay.p90Ms * 0.9);
    expect(draws[3600]!).toBeLessThan(delay.p90Ms * 1.1);
    const again = new DeviceLatency("pixel-usb", 7);
    const first = new DeviceLatency("pixel-usb", 7);
    expect(Array.from({ length: 5 }, () => again.draw("shellOpenMs"))).toEqual(Array.from({ length: 5 }, () => first.draw("shellOpenMs")));
  });

  it("draws each kind of delay from its own stream: after a reseed the k-th dump waits the same, whatever ran before it", () => {
    const model = new DeviceLatency("pixel-usb", 7);
    const dumps = [model.draw("uiDumpMs"), model.draw("uiDumpMs")];
    model.reseed(7);
    // Other delays drawn in between (more shells, more programs) do not shift the dump's stream.
    for (let i = 0; i < 9; i++) model.draw("shellOpenMs");
    model.draw("spawnMs");
    const first = model.draw("uiDumpMs");
    model.draw("linkMs");
    expect([first, model.draw("uiDumpMs")]).toEqual(dumps);
    // Streams differ from each other and from another seed.
    model.reseed(8);
    expect(model.draw("uiDumpMs")).not.toBe(dumps[0]);
    expect(dumps[0]).not.toBe(dumps[1]);
  });

  it("waits what it drew, fractions of a millisecond included, whichever phase of the event loop it starts in", async () => {
    const model = new DeviceLatency();
    const once = (ms: number, start: (run: () => void) => void): Promise<number> =>
      new Promise<number>((resolve) =>
        start(() => {
          const t = performance.now();
          void model.wait("spawnMs", 1, ms).then(() => resolve(performance.now() - t));
        })
      );
    // Node's timers keep whole milliseconds (2.6 became about 2.2) and fire
    // relative to the loop's cached time, so a wait started from setImmediate
    // (a background job in the shell) ran shorter or longer than one started
    // from a socket callback. Never shorter than drawn; close to it at best:
    // whole-millisecond timers made every wait of 0.4 ms take 1 ms or more.
    // A busy machine may delay any one wait (or many in a row), so waits are
    // drawn (15 at least) until one comes close (at most 300): every one is checked never to
    // be shorter, and one close wait is what whole-millisecond timers never give.
    for (const ms of [0.4, 2.6, 5.5]) {
      for (const start of [(run: () => void) => setImmediate(run), (run: () => void) => setTimeout(run, 1)]) {
        const waits: number[] = [];
        while (waits.length < 15 || (waits.length < 300 && !waits.some((w) => w < ms + 0.5))) waits.push(await once(ms, start));
        expect(Math.min(...waits)).toBeGreaterThanOrEqual(ms);
        expect(Math.min(...waits), `${waits.length} waits of ${ms} ms`).toBeLessThan(ms + 0.5);
      }
    }
  });

  it("is instant by default and names the choices for an unknown profile", () => {
    const model = new DeviceLatency();
    expect(model.instant).toBe(true);
    expect(model.draw("shellOpenMs")).toBe(0);
    expect(() => model.set("pixel-9")).toThrow(/unknown latency profile "pixel-9"; choose one of instant, pixel-usb, emulator, wifi-adb/);
    expect(() => parseCliOptions(["--latency", "slow"])).toThrow(/--latency must be one of instant, pixel-usb, emulator, wifi-adb/);
    expect(parseCliOptions(["--latency", "wifi-adb"]).latency).toBe("wifi-adb");
  });
});

describe("a phone under a latency profile, through the real adb server", () => {
  let server: AdbServer;
  let sim: Devsim;
  let dir: string;
  beforeAll(async () => {
    server = await startAdbServer();
    sim = await startDevsim({ devices: [{ latency: "pixel-usb", latencySeed: 3 }], adbPort: server.port, control: true });
    dir = await mkdtemp(join(tmpdir(), "devsim-latency-"));
  }, 30_000);
  afterAll(async () => {
    await sim?.stop();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const device = () => Adb.createClient({ port: server.port }).getDevice(sim.devices[0]!.serial);
  const timed = async (fn: () => Promise<unknown>) => {
    const t = performance.now();
    await fn();
    return performance.now() - t;
  };
  const shell = async (command: string) => Adb.util.readAll(await device().shell(command));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const setProfile = (profile: string) => runAction(sim.controlUrl!, sim.devices[0]!.serial, { action: "latency", profile });

  it("takes a shell start-up per command, and the slow-link fault adds to it", async () => {
    const summary = await setProfile("pixel-usb");
    expect(summary.latency).toBe("pixel-usb");
    const usb: number[] = [];
    for (let i = 0; i < 5; i++) usb.push(await timed(() => shell("echo hi")));
    // shellOpenMs: median 20 ms, 10th percentile about 13 ms (an instant phone answers in 1-2 ms here).
    expect(median(usb)).toBeGreaterThan(12);
    await setFaults(sim.controlUrl!, sim.devices[0]!.serial, { latencyMs: 150 });
    try {
      expect(await timed(() => shell("echo hi"))).toBeGreaterThan(150 + 8);
    } finally {
      await clearFaults(sim.controlUrl!, sim.devices[0]!.serial);
    }
  });

  it("takes screencap and uiautomator dump times that scale with the screen", async () => {
    await setProfile("pixel-usb");
    const bytes = await timed(async () => {
      const png = await shell("screencap -p");
      expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");
    });
    // 1080x2400: capture 40 + encode 230 ms per megapixel at the median, about 700 ms.
    expect(bytes).toBeGreaterThan(300);
    const dump = await timed(async () => expect((await shell("uiautomator dump /dev/tty")).toString()).toContain("<hierarchy"));
    expect(dump).toBeGreaterThan(900);
  });

  it("moves pushed files at the profile bandwidth", async () => {
    await setProfile("pixel-usb");
    const file = join(dir, "blob.bin");
    await writeFile(file, Buffer.alloc(6_000_000, 7));
    const t = await timed(async () => {
      const r = await runAdb(server.port, ["-s", sim.devices[0]!.serial, "push", file, "/data/local/tmp/blob.bin"]);
      expect(r.code).toBe(0);
    });
    // 6 MB at 36 MB/s.
    expect(t).toBeGreaterThan(150);
  });

  it("refuses an unknown profile through the control API, naming the field", async () => {
    await expect(controlRequest(sim.controlUrl!, "POST", `/devices/${encodeURIComponent(sim.devices[0]!.serial)}/actions`, { action: "latency", profile: "fast" })).rejects.toThrow(
      /profile must be one of instant, pixel-usb, emulator, wifi-adb/,
    );
  });
});
