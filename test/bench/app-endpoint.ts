/**
 * App SDK endpoint discovery on a simulated phone (descriptor read through
 * run-as, exact adb forward found or made, identity-checked request through
 * it) against the bare `run-as PKG cat FILE` round trip in the same run.
 *
 *   node test/dist/bench/app-endpoint.js [--runs 50]
 */
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { shellV2 } from "@farm/agent/adb/adb-shell";
import { ANDROID_ENDPOINT_FILE, discoverAndroidEndpoint } from "@farm/agent/app-sdk/android-endpoint";
import { adbConnect, runAdb, SimDevice, startAdbServer } from "../devsim/index.js";
import { addedMs, emitReport, round } from "./bench-report.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "50" } } });
const RUNS = Number(values.runs);
const PKG = "com.example.farmdemo";

const adb = await startAdbServer();
const addr = { host: "127.0.0.1", port: adb.port };

/** Discovery against the bare descriptor read, on one phone. */
async function measure(phone: SimDevice, runs: number) {
  const serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
  await runAdb(adb.port, ["-s", serial, "shell", `am start -n ${PKG}/.MainActivity`]);
  for (let i = 0; i < 100; i++) {
    const r = await shellV2(addr, serial, `run-as ${PKG} cat ${ANDROID_ENDPOINT_FILE}`);
    if (r.stdout.includes("\"ok\":true")) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  const t0 = performance.now();
  const first = await discoverAndroidEndpoint(addr, serial, PKG);
  const firstMs = performance.now() - t0;
  if (!first.forwardCreated) throw new Error("expected the first discovery to create the forward");
  const bare: number[] = [];
  const full: number[] = [];
  for (let i = 0; i < runs; i++) {
    let s = performance.now();
    await shellV2(addr, serial, `run-as ${PKG} cat ${ANDROID_ENDPOINT_FILE}`);
    bare.push(performance.now() - s);
    s = performance.now();
    await discoverAndroidEndpoint(addr, serial, PKG);
    full.push(performance.now() - s);
  }
  return { bare, full, firstMs };
}

const phone = new SimDevice({ serialno: "BENCHSDK", props: { "ro.debuggable": "1" } });
const usbPhone = new SimDevice({ serialno: "BENCHSDK2", props: { "ro.debuggable": "1" }, latency: "pixel-usb", latencySeed: 9 });
try {
  const { bare, full, firstMs } = await measure(phone, RUNS);
  const usb = await measure(usbPhone, Math.min(RUNS, 20));
  const b = median(bare);
  const f = median(full);
  const usbRatio = median(usb.full) / median(usb.bare);
  console.log(`discovery (descriptor + forward reused + identity check): median ${f.toFixed(2)} ms, p95 ${percentile(full, 95).toFixed(2)} ms over ${RUNS}`);
  console.log(`bare run-as cat round trip: median ${b.toFixed(2)} ms; ratio ${(f / b).toFixed(2)}`);
  console.log(`first discovery (creates the adb forward): ${firstMs.toFixed(2)} ms (ratio ${(firstMs / b).toFixed(2)})`);
  console.log(`pixel-usb: discovery ${median(usb.full).toFixed(1)} ms vs bare ${median(usb.bare).toFixed(1)} ms (ratio ${usbRatio.toFixed(2)})`);
  emitReport("app-endpoint", [{ measure: "app endpoint discovery vs bare descriptor read", instant: addedMs(f - b), realistic: round(usbRatio, 2), profile: "pixel-usb", target: "", pass: null }], {
    instant: { discoveryMedianMs: round(f, 2), bareMedianMs: round(b, 2), firstMs: round(firstMs, 2) },
    pixelUsb: { discoveryMedianMs: round(median(usb.full), 2), bareMedianMs: round(median(usb.bare), 2) },
  });
} finally {
  await phone.close();
  await usbPhone.close();
  await adb.stop();
}
