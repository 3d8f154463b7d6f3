import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBounded } from "./bounded-process.js";
import { mediaTools, verifyVideo } from "./media-verify.js";

const tools = mediaTools();
let dir: string;
let good: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "farm-media-"));
  good = join(dir, "good.mp4");
  execFileSync(tools.ffmpeg, ["-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=15", "-t", "2", "-c:v", "libx264", "-pix_fmt", "yuv420p", good]);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("media verification", () => {
  it("passes a whole recording: codec, dimensions, duration, every frame decoded", async () => {
    const v = await verifyVideo(good, { width: 320, height: 240 }, tools);
    expect(v.problems).toEqual([]);
    expect(v.ok).toBe(true);
    expect(v.probe).toMatchObject({ codec: "h264", width: 320, height: 240 });
    expect(v.probe?.durationMs).toBeGreaterThan(1_500);
    expect(v.frames).toBe(30);
  });

  it("fails an encoder's fallback to other dimensions", async () => {
    const v = await verifyVideo(good, { width: 640, height: 480 }, tools);
    expect(v.ok).toBe(false);
    expect(v.problems.map((p) => p.code)).toEqual(["VIDEO_SIZE_MISMATCH"]);
    // The probe's facts are kept for the manifest.
    expect(v.probe).toMatchObject({ width: 320, height: 240 });
  });

  it("fails media whose frames are damaged although the container parses", async () => {
    const bytes = readFileSync(good);
    const at = bytes.indexOf("mdat");
    const size = bytes.readUInt32BE(at - 4);
    for (let i = at + 4 + Math.floor(size / 4); i < at + Math.floor((3 * size) / 4); i++) bytes[i] = (i * 131) & 0xff;
    const bad = join(dir, "corrupt.mp4");
    writeFileSync(bad, bytes);
    const v = await verifyVideo(bad, { width: 320, height: 240 }, tools);
    expect(v.ok).toBe(false);
    expect(v.problems.map((p) => p.code)).toContain("VIDEO_DECODE_FAILED");
  });

  it("fails a truncated file (no index) at the probe", async () => {
    const bytes = readFileSync(good);
    const cut = join(dir, "cut.mp4");
    writeFileSync(cut, bytes.subarray(0, Math.floor(bytes.length / 2)));
    const v = await verifyVideo(cut, { width: 320, height: 240 }, tools);
    expect(v.ok).toBe(false);
    expect(v.problems[0]?.code).toBe("VIDEO_PROBE_FAILED");
  });
});

describe("bounded helper processes", () => {
  it("kills a process at its hard deadline", async () => {
    const r = await runBounded("sleep", ["10"], { deadlineMs: 200, maxOutputBytes: 1024 });
    expect(r.timedOut).toBe(true);
    expect(r.signal).toBe("SIGKILL");
  });

  it("kills a process that writes past the output cap", async () => {
    const r = await runBounded("yes", [], { deadlineMs: 10_000, maxOutputBytes: 64 * 1024 });
    expect(r.overflowed).toBe(true);
    expect(r.timedOut).toBe(false);
    expect(r.stdout.length).toBeLessThanOrEqual(64 * 1024);
  });

  it("reports a tool that cannot start", async () => {
    const r = await runBounded(join(dir, "no-such-tool"), [], { deadlineMs: 1_000, maxOutputBytes: 1024 });
    expect(r.spawnError).toMatch(/ENOENT/);
  });
});
