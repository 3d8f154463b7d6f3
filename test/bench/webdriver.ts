/**
 * The WebDriver endpoint's cost: a find (accessibility id) and a click on
 * the launcher's Settings icon through WebDriver, against `farm input tap
 * --desc Settings` (one SendInput that resolves the element on the agent:
 * the CLI's call, without the CLI's process start) on the same phone in the
 * same run. On an instant phone (farm's own cost) and under devsim's
 * pixel-usb latency profile (what a user sees: a UI dump costs what it costs
 * on a phone).
 *
 *   node test/dist/bench/webdriver.js [--runs 20] [--realistic-runs 6]
 */
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { noDelaySessionOptions } from "@farm/shared/no-delay";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { startLab } from "../support/lab.js";
import type { LatencyProfileName } from "../devsim/latency/latency-profiles.js";
import { addedMs, emitReport, round } from "./bench-report.js";
import { median } from "./proc-stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "20" }, "realistic-runs": { type: "string", default: "6" } } });
const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

async function run(latency: LatencyProfileName, runs: number): Promise<{ wd: number; cli: number; wdFind: number; tree: number; floor: number }> {
  const lab = await startLab(`bench-webdriver-${latency}`, { logLevel: "info" });
  try {
    const { serial } = await lab.addDevice({ serialno: "WDBENCH1", latency, latencySeed: 5 });
    const token = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    const base = String(lab.standalone.ready["url"]);
    const wd = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
      const res = await fetch(`${base}/wd/hub${path}`, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
      const json = (await res.json()) as { value: Record<string, unknown> };
      if (!res.ok) throw new Error(`${method} ${path}: ${JSON.stringify(json.value)}`);
      return json.value;
    };

    // WebDriver: find + click, then home again (not measured).
    const session = await wd("POST", "/session", { capabilities: { alwaysMatch: { platformName: "Android", "appium:udid": serial } } });
    const id = String(session["sessionId"]);
    const home = { script: "mobile: shell", args: [{ command: "input", args: ["keyevent", "KEYCODE_HOME"] }] };
    // The endpoint's own floor: a command that makes no farm call.
    const floors: number[] = [];
    for (let i = 0; i < runs + 1; i++) {
      const t = performance.now();
      await wd("GET", `/session/${id}/timeouts`);
      if (i > 0) floors.push(performance.now() - t);
    }
    const wdTimes: number[] = [];
    const wdFinds: number[] = [];
    for (let i = 0; i < runs + 1; i++) {
      await wd("POST", `/session/${id}/execute/sync`, home);
      const t = performance.now();
      const el = await wd("POST", `/session/${id}/element`, { using: "accessibility id", value: "Settings" });
      const found = performance.now();
      await wd("POST", `/session/${id}/element/${String(el[ELEMENT])}/click`, {});
      // The first is a warm-up (connections, caches).
      if (i > 0) {
        wdTimes.push(performance.now() - t);
        wdFinds.push(found - t);
      }
    }
    await wd("DELETE", `/session/${id}`);

    // The CLI's call for `farm input tap --desc Settings`, holding a lease of its own.
    const headers: Record<string, string> = {};
    const auth: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      for (const [k, v] of Object.entries(headers)) req.header.set(k, v);
      return next(req);
    };
    const transport = createGrpcTransport({ baseUrl: base, interceptors: [auth], nodeOptions: noDelaySessionOptions() });
    const leases = createClient(LeaseService, transport);
    const lease = await leases.acquireLease({ selector: { serial }, ttlMs: 600_000 });
    headers["x-farm-lease"] = lease.token;
    const devices = createClient(DeviceService, transport);
    const cliTimes: number[] = [];
    for (let i = 0; i < runs + 1; i++) {
      await devices.sendInput({ target: { serial }, kind: { case: "key", value: "KEYCODE_HOME" } });
      const t = performance.now();
      await devices.sendInput({ target: { serial }, kind: { case: "tap", value: { x: 0, y: 0, element: { by: { case: "contentDesc", value: "Settings" } } } } });
      if (i > 0) cliTimes.push(performance.now() - t);
    }
    // The WebDriver layer's own cost: its find against the one farm call it makes (GetUiTree), made directly.
    await devices.sendInput({ target: { serial }, kind: { case: "key", value: "KEYCODE_HOME" } });
    const trees: number[] = [];
    for (let i = 0; i < runs + 1; i++) {
      const t = performance.now();
      await devices.getUiTree({ target: { serial } });
      if (i > 0) trees.push(performance.now() - t);
    }
    await leases.releaseLease({ token: lease.token });
    return { wd: median(wdTimes), cli: median(cliTimes), wdFind: median(wdFinds), tree: median(trees), floor: median(floors) };
  } finally {
    await lab.stop();
  }
}

const instant = await run("instant", Number(values.runs));
const usb = await run("pixel-usb", Number(values["realistic-runs"]));
console.log(`instant: webdriver find+click median ${instant.wd.toFixed(2)} ms, farm input tap --desc ${instant.cli.toFixed(2)} ms (ratio ${(instant.wd / instant.cli).toFixed(2)})`);
console.log(`pixel-usb: webdriver find+click median ${usb.wd.toFixed(1)} ms, farm input tap --desc ${usb.cli.toFixed(1)} ms (ratio ${(usb.wd / usb.cli).toFixed(2)})`);
console.log(`instant: webdriver find ${instant.wdFind.toFixed(2)} ms vs its GetUiTree made directly ${instant.tree.toFixed(2)} ms (ratio ${(instant.wdFind / instant.tree).toFixed(2)})`);
console.log(`instant: a WebDriver command that makes no farm call (GET timeouts): ${instant.floor.toFixed(2)} ms`);
console.log(`pixel-usb: webdriver find ${usb.wdFind.toFixed(1)} ms vs its GetUiTree made directly ${usb.tree.toFixed(1)} ms (ratio ${(usb.wdFind / usb.tree).toFixed(2)})`);
emitReport("webdriver", [
  {
    measure: "WebDriver find+click vs farm input tap --desc",
    instant: addedMs(instant.wd - instant.cli),
    realistic: round(usb.wd / usb.cli, 2),
    profile: "pixel-usb",
    baseline: `input tap by element ${usb.cli.toFixed(0)} ms`,
    target: "",
    pass: null,
  },
  {
    measure: "WebDriver find vs its GetUiTree made directly",
    instant: addedMs(instant.wdFind - instant.tree),
    realistic: round(usb.wdFind / usb.tree, 2),
    profile: "pixel-usb",
    baseline: `GetUiTree ${usb.tree.toFixed(0)} ms`,
    target: "",
    pass: null,
  },
], {
  instant: { webdriverMedianMs: round(instant.wd, 2), inputTapMedianMs: round(instant.cli, 2), findMedianMs: round(instant.wdFind, 2), getUiTreeMedianMs: round(instant.tree, 2), floorMedianMs: round(instant.floor, 2) },
  pixelUsb: { webdriverMedianMs: round(usb.wd, 2), inputTapMedianMs: round(usb.cli, 2), findMedianMs: round(usb.wdFind, 2), getUiTreeMedianMs: round(usb.tree, 2) },
});
