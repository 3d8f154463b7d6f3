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
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "50" } } });
const RUNS = Number(values.runs);
const PKG = "com.example.farmdemo";

const adb = await startAdbServer();
const phone = new SimDevice({ serialno: "BENCHSDK", props: { "ro.debuggable": "1" } });
try {
  const serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
  const addr = { host: "127.0.0.1", port: adb.port };
  await runAdb(adb.port, ["-s", serial, "shell", `am start -n ${PKG}/.MainActivity`]);
  for (let i = 0; i < 100; i++) {
    const r = await shellV2(addr, serial, `run-as ${PKG} cat ${ANDROID_ENDPOINT_FILE}`);
    if (r.stdout.includes('"ok":true')) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  const t0 = performance.now();
  const first = await discoverAndroidEndpoint(addr, serial, PKG);
  const firstMs = performance.now() - t0;
  if (!first.forwardCreated) throw new Error("expected the first discovery to create the forward");
  const bare: number[] = [];
  const full: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    let s = performance.now();
    await shellV2(addr, serial, `run-as ${PKG} cat ${ANDROID_ENDPOINT_FILE}`);
    bare.push(performance.now() - s);
    s = performance.now();
    await discoverAndroidEndpoint(addr, serial, PKG);
    full.push(performance.now() - s);
  }
  const b = median(bare);
  const f = median(full);
  console.log(`discovery (descriptor + forward reused + identity check): median ${f.toFixed(2)} ms, p95 ${percentile(full, 95).toFixed(2)} ms over ${RUNS}`);
  console.log(`bare run-as cat round trip: median ${b.toFixed(2)} ms; ratio ${(f / b).toFixed(2)}`);
  console.log(`first discovery (creates the adb forward): ${firstMs.toFixed(2)} ms (ratio ${(firstMs / b).toFixed(2)})`);
} finally {
  await phone.close();
  await adb.stop();
}
