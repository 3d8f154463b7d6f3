/**
 * devsim throughput and latency: pull of a 100 MiB file from a simulated
 * device through the real adb server (adbkit and the adb CLI), against a plain
 * loopback TCP copy of the same bytes in the same run (target ratio ≥ 0.3);
 * and `screencap -p` latency at 1080×2400 (median over N runs), with and
 * without a scene change before each capture. Prints; asserts nothing.
 *
 *   node test/dist/bench/devsim-pull.js [--mib 100] [--runs 3] [--screencaps 15]
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { createServer, connect, type AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { startAdbServer, startDevsim } from "../devsim/index.js";
import { makeTempDir } from "../support/temp-dir.js";
import { emitReport } from "./bench-report.js";
import { median } from "./proc-stats.js";

const { values } = parseArgs({
  options: {
    mib: { type: "string", default: "100" },
    runs: { type: "string", default: "3" },
    screencaps: { type: "string", default: "15" },
  },
});
const SIZE = Number(values.mib) * 1024 * 1024;
const RUNS = Number(values.runs);
const SCREENCAPS = Number(values.screencaps);

const { Adb } = createRequire(import.meta.url)("@devicefarmer/adbkit") as typeof import("@devicefarmer/adbkit");

/** MiB/s of streaming `data` over one loopback TCP connection inside this process. */
async function loopbackCopy(data: Buffer): Promise<number> {
  const server = createServer((socket) => socket.end(data));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const started = performance.now();
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    const socket = connect((server.address() as AddressInfo).port, "127.0.0.1");
    socket.on("data", (chunk: Buffer) => (received += chunk.length));
    socket.on("end", resolve);
    socket.on("error", reject);
  });
  const seconds = (performance.now() - started) / 1000;
  server.close();
  if (received !== data.length) throw new Error(`loopback copy lost bytes: ${received}/${data.length}`);
  return data.length / 1024 / 1024 / seconds;
}

function run(command: string, args: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    execFile(command, args, { encoding: "buffer", maxBuffer: 256 * 1024 * 1024 }, (error, stdout, stderr) => error ? reject(new Error(`${command} ${args.join(" ")}: ${error.message} ${stderr.toString()}`)) : resolve(stdout))
  );
}

const best = (xs: number[]) => Math.max(...xs);
const fmt = (x: number) => x.toFixed(1);

async function main(): Promise<void> {
  const server = await startAdbServer();
  const sim = await startDevsim({ devices: 1, adbPort: server.port });
  const pulled = await makeTempDir("bench-pull");
  try {
    const { serial, device } = sim.devices[0]!;
    const data = randomBytes(SIZE);
    device.state.fs.writeFile("/data/local/tmp/bench.bin", data, device.state.shellCaller);
    const client = Adb.createClient({ port: server.port }).getDevice(serial);

    const loopback: number[] = [];
    const viaAdbkit: number[] = [];
    const viaCli: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      loopback.push(await loopbackCopy(data));

      let started = performance.now();
      const transfer = await client.pull("/data/local/tmp/bench.bin");
      let received = 0;
      await new Promise<void>((resolve, reject) => {
        transfer.on("data", (chunk: Buffer) => (received += chunk.length));
        transfer.on("end", () => resolve());
        transfer.on("error", reject);
      });
      if (received !== SIZE) throw new Error(`adbkit pull got ${received}/${SIZE} bytes`);
      viaAdbkit.push(SIZE / 1024 / 1024 / ((performance.now() - started) / 1000));

      started = performance.now();
      // Into a temp file, never /dev/null: adb pull replaces its destination, and run as root it replaced /dev/null with a regular file.
      await run("adb", ["-P", String(server.port), "-s", serial, "pull", "/data/local/tmp/bench.bin", pulled.path + "/bench.bin"]);
      viaCli.push(SIZE / 1024 / 1024 / ((performance.now() - started) / 1000));
    }
    const base = best(loopback);
    console.log(`pull ${values.mib} MiB, best of ${RUNS}:`);
    console.log(`  loopback TCP copy      ${fmt(base)} MiB/s`);
    console.log(`  adbkit pull (devsim)   ${fmt(best(viaAdbkit))} MiB/s   ratio ${(best(viaAdbkit) / base).toFixed(2)} (target >= 0.3)`);
    console.log(`  adb pull to a file     ${fmt(best(viaCli))} MiB/s   ratio ${(best(viaCli) / base).toFixed(2)}`);

    const { width, height } = device.state.display.logicalSize;
    const still: number[] = [];
    const changing: number[] = [];
    for (let i = 0; i < SCREENCAPS; i++) {
      let started = performance.now();
      const png = await run("adb", ["-P", String(server.port), "-s", serial, "exec-out", "screencap", "-p"]);
      still.push(performance.now() - started);
      if (png.subarray(1, 4).toString() !== "PNG") throw new Error("screencap did not return a PNG");
      // A new scene each time, so nothing is served from the renderer's cache.
      device.state.screen.home();
      device.state.screen.start(i % 2 === 0 ? "com.example.farmdemo" : "com.android.settings");
      started = performance.now();
      await run("adb", ["-P", String(server.port), "-s", serial, "exec-out", "screencap", "-p"]);
      changing.push(performance.now() - started);
    }
    console.log(`screencap -p at ${width}x${height}, median of ${SCREENCAPS}:`);
    console.log(`  still scene (cached PNG)   ${fmt(median(still))} ms`);
    console.log(`  new scene each capture     ${fmt(median(changing))} ms`);
    // The simulator's own speed: no latency profile applies to it.
    emitReport(
      "devsim-pull",
      [
        { measure: `devsim: adbkit pull ${values.mib} MiB vs TCP copy`, instant: `${(best(viaAdbkit) / base).toFixed(2)}x (${fmt(best(viaAdbkit))} MiB/s)`, realistic: null, target: ">= 0.3x", pass: best(viaAdbkit) / base >= 0.3 },
        { measure: `devsim: screencap -p ${width}x${height}, new scene`, instant: `${fmt(median(changing))} ms`, realistic: null, target: "", pass: null },
      ],
      { loopbackMiBps: base, adbkitMiBps: best(viaAdbkit), adbCliMiBps: best(viaCli), screencapStillMs: median(still), screencapNewSceneMs: median(changing) },
    );
  } finally {
    await sim.stop();
    await server.stop();
    await pulled.remove();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
