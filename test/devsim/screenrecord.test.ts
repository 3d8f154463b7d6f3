import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitUntil } from "./host/wait-until.js";
import { adbBinary, runAdb, startAdbServer, startDevsim, type AdbServer, type Devsim } from "./index.js";

// screenrecord: a real H.264 MP4 through ffmpeg, pulled with the real adb CLI and verified with ffprobe + a full decode.

let server: AdbServer;
let sim: Devsim;
let dir: string;

beforeAll(async () => {
  server = await startAdbServer();
  // A 720x1600 phone keeps encoding cheap.
  sim = await startDevsim({ devices: [{ profile: 3 }], adbPort: server.port });
  dir = await mkdtemp(join(tmpdir(), "devsim-rec-test-"));
}, 20_000);

afterAll(async () => {
  await sim?.stop();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

// Bounded near the tests' own timeout: a busy machine may take its time, a hung phone does not pass.
const adb = (args: string[], timeoutMs = 50_000) => runAdb(server.port, ["-s", sim.devices[0]!.serial, ...args], { timeoutMs });
const shell = async (command: string) => (await adb(["shell", command])).stdout;

function run(command: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => execFile(command, args, { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr })));
}

async function pull(remote: string): Promise<string> {
  const local = join(dir, remote.replace(/\//g, "_"));
  expect((await adb(["pull", remote, local])).code).toBe(0);
  return local;
}

async function probe(file: string): Promise<{ codec: string; width: number; height: number; duration: number }> {
  const result = await run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height:format=duration", "-of", "json", file]);
  expect(result.code, result.stderr).toBe(0);
  const json = JSON.parse(result.stdout) as { streams: Array<{ codec_name: string; width: number; height: number }>; format: { duration: string } };
  const stream = json.streams[0]!;
  return { codec: stream.codec_name, width: stream.width, height: stream.height, duration: Number(json.format.duration) };
}

async function fullDecode(file: string): Promise<void> {
  const result = await run("ffmpeg", ["-v", "error", "-i", file, "-f", "null", "-"]);
  expect(result, result.stderr).toMatchObject({ code: 0, stderr: "" });
}

/** Coded slices (NAL types 1 and 5) in an Annex B stream: devsim's encoder writes one per frame. */
function slices(annexB: Buffer): number {
  let count = 0;
  for (let i = annexB.indexOf(Buffer.from([0, 0, 1])); i >= 0; i = annexB.indexOf(Buffer.from([0, 0, 1]), i + 3)) {
    const type = (annexB[i + 3] ?? 0) & 0x1f;
    if (type === 1 || type === 5) count++;
  }
  return count;
}

const pidOf = async () => (await shell("pidof screenrecord")).trim() || undefined;

describe("screenrecord", () => {
  it("records scene changes until the time limit; ps shows the process meanwhile", async () => {
    const recording = adb(["shell", "screenrecord --time-limit 2 --bit-rate 2M /sdcard/Movies/a.mp4"]);
    await waitUntil(pidOf, { timeoutMs: 50_000, what: "screenrecord in ps" });
    const ps = await shell("ps -A -o PID,USER,ARGS,STIME");
    expect(ps).toMatch(/^\s*\d+ shell\s+screenrecord --time-limit 2 --bit-rate 2M \/sdcard\/Movies\/a.mp4 \d\d:\d\d:\d\d$/m);
    await shell("am start -n com.example.farmdemo/.MainActivity");
    expect(await recording).toMatchObject({ code: 0, stderr: "" });
    expect(await pidOf()).toBeUndefined();

    const file = await pull("/sdcard/Movies/a.mp4");
    const info = await probe(file);
    expect(info).toMatchObject({ codec: "h264", width: 720, height: 1600 });
    expect(info.duration).toBeGreaterThan(0);
    await fullDecode(file);
  });

  it("SIGINT (kill -2 PID) finalizes the file cleanly; a still screen gives a short timeline", async () => {
    const recording = adb(["shell", "screenrecord --size 360x800 /sdcard/b.mp4"]);
    const pid = await waitUntil(pidOf, { timeoutMs: 50_000, what: "screenrecord in ps" });
    expect(await adb(["shell", `kill -2 ${pid}`])).toMatchObject({ code: 0 });
    // Ended by the signal: with no time limit given it would record for 180 s, past this test's own timeout.
    expect(await recording).toMatchObject({ code: 0 });
    const file = await pull("/sdcard/b.mp4");
    const info = await probe(file);
    expect(info).toMatchObject({ codec: "h264", width: 360, height: 800 });
    expect(info.duration).toBeLessThan(0.5);
    await fullDecode(file);
  });

  it("SIGKILL leaves an unfinalized MP4 that ffprobe rejects", async () => {
    const recording = adb(["shell", "screenrecord /sdcard/c.mp4"]);
    await waitUntil(pidOf, { timeoutMs: 50_000, what: "screenrecord in ps" });
    await adb(["shell", "kill -9 $(pidof screenrecord)"]);
    expect((await recording).code).toBe(137);
    const result = await run("ffprobe", ["-v", "error", await pull("/sdcard/c.mp4")]);
    expect(result.code).not.toBe(0);
  });

  it("bad options and the encoder-failure fault fail like screenrecord", async () => {
    expect(await adb(["shell", "screenrecord --time-limit 181 /sdcard/d.mp4"])).toMatchObject({ code: 2, stderr: "Time limit 181s outside acceptable range [1,180]\n" });
    expect(await adb(["shell", "screenrecord"])).toMatchObject({ code: 2, stderr: "Must specify output file (see --help).\n" });
    sim.devices[0]!.device.faults.set({ screenrecordFails: true });
    try {
      expect(await adb(["shell", "screenrecord /sdcard/e.mp4"])).toMatchObject({ code: 1, stderr: "ERROR: unable to configure video/avc codec at 720x1600 (err=-38)\n" });
    } finally {
      sim.devices[0]!.device.faults.set({ screenrecordFails: null });
    }
  });

  it("streams raw H.264 to stdout with --output-format=h264 -, frame by frame as the scene changes", async () => {
    const proc = spawn(adbBinary(), ["-P", String(server.port), "-s", sim.devices[0]!.serial, "exec-out", "screenrecord --output-format=h264 --time-limit 60 -"], { stdio: ["ignore", "pipe", "pipe"] });
    const parts: Buffer[] = [];
    let received = 0;
    proc.stdout.on("data", (chunk: Buffer) => {
      received += chunk.length;
      parts.push(chunk);
    });
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    await waitUntil(() => received > 0, { timeoutMs: 50_000, what: "the first H.264 bytes" });
    // Streamed as encoded: bytes that arrive while it still records, for scene changes made after the first ones
    // (events, where a 3 s time limit and a 1.5 s margin raced each other under load).
    for (const key of ["KEYCODE_HOME", "KEYCODE_APP_SWITCH", "KEYCODE_HOME"]) await adb(["shell", `input keyevent ${key}`]);
    await waitUntil(() => slices(Buffer.concat(parts)) >= 3, { timeoutMs: 50_000, what: "three frames streamed while it records" });
    expect(await adb(["shell", "kill -2 $(pidof screenrecord)"])).toMatchObject({ code: 0 });
    await exited;
    const bytes = Buffer.concat(parts);
    // Annex B, opening with the sequence parameter set (NAL type 7).
    expect(bytes.subarray(0, 5)).toEqual(Buffer.from([0, 0, 0, 1, 0x67]));
    const file = join(dir, "live.h264");
    await writeFile(file, bytes);
    const probed = await run("ffprobe", ["-v", "error", "-f", "h264", "-count_frames", "-show_entries", "stream=codec_name,profile,width,height,nb_read_frames", "-of", "json", file]);
    expect(probed.code, probed.stderr).toBe(0);
    const stream = (JSON.parse(probed.stdout) as { streams: Array<{ codec_name: string; profile: string; width: number; height: number; nb_read_frames: string }> }).streams[0]!;
    expect(stream).toMatchObject({ codec_name: "h264", width: 720, height: 1600 });
    expect(stream.profile).toMatch(/Baseline/);
    expect(Number(stream.nb_read_frames)).toBeGreaterThanOrEqual(3);
  });

  it("refuses an output format it does not write", async () => {
    const r = await adb(["shell", "screenrecord --output-format=frames -"]);
    expect(r.stderr + r.stdout).toContain("Unknown format 'frames'");
  });
});
