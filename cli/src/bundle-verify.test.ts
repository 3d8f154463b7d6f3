import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { EvidenceArtifact, EvidenceManifest } from "@farm/shared/evidence-manifest";
import { verifyBundle } from "./bundle-verify.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-verify-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const t0 = "2026-11-30T05:59:35.628Z";
const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

function artifact(kind: EvidenceArtifact["kind"], path: string, bytes: Buffer, status: EvidenceArtifact["status"] = "complete"): EvidenceArtifact {
  return { kind, path, mimeType: "application/octet-stream", status, bytes: bytes.length, sha256: sha(bytes), startedAt: t0, finishedAt: t0, durationMs: 1, commandId: null, taskId: null };
}

function manifest(over: Partial<EvidenceManifest>): EvidenceManifest {
  return {
    schemaVersion: 1,
    evidenceId: "7c122f86-0239-4be4-9aff-a41ec0e4c381",
    kind: "still",
    label: null,
    context: {},
    device: {
      serial: "s",
      physicalId: "pd-1",
      agentId: "a",
      agentHost: "h",
      cliVersion: "0.1.0",
      agentVersion: "0.1.0",
      bootId: null,
      appPackage: null,
      hierarchySource: "uiautomator",
      apiLevel: 34,
      androidVersion: "14",
      manufacturer: "Google",
      model: "Pixel 7",
      deviceType: "unknown",
      deviceTypeProperties: { "ro.kernel.qemu": null, "ro.boot.qemu": null },
      display: { width: 40, height: 60, density: 420, rotation: 0 },
    },
    startedAt: t0,
    finishedAt: t0,
    status: "complete",
    artifacts: [],
    errors: [],
    ...over,
  };
}

/** Writes the files and a manifest whose sizes and hashes match them exactly. */
async function bundle(files: Record<string, Buffer>, m: EvidenceManifest): Promise<void> {
  for (const [name, bytes] of Object.entries(files)) await writeFile(join(dir, name), bytes);
  await writeFile(join(dir, "manifest.json"), JSON.stringify(m));
}

const png = (width: number, height: number) => sharp({ create: { width, height, channels: 3, background: { r: 10, g: 200, b: 30 } } }).png().toBuffer();

function h264(width: number, height: number): Buffer {
  const file = join(dir, `src-${width}x${height}.mp4`);
  execFileSync("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", `testsrc=size=${width}x${height}:rate=10`, "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-y", file]);
  return execFileSync("cat", [file]);
}

describe("verifyBundle: still bundles", () => {
  it("accepts a complete screenshot that decodes to the recorded display size", async () => {
    const shot = await png(40, 60);
    await bundle({ "screenshot.png": shot }, manifest({ artifacts: [artifact("screenshot", "screenshot.png", shot)] }));
    expect(await verifyBundle(dir)).toMatchObject({ ok: true, checked: 1, problems: [] });
  });

  it("refuses a complete screenshot that is text, even with a matching size and sha256", async () => {
    const text = Buffer.from("this is not a picture\n".repeat(10));
    await bundle({ "screenshot.png": text }, manifest({ artifacts: [artifact("screenshot", "screenshot.png", text)] }));
    const r = await verifyBundle(dir);
    expect(r.ok).toBe(false);
    expect(r.problems).toHaveLength(1);
    expect(r.problems[0]).toMatch(/^screenshot\.png: .*PNG/);
  });

  it("refuses a complete screenshot of another size than recorded, allowing the rotated one", async () => {
    const shot = await png(40, 50);
    await bundle({ "screenshot.png": shot }, manifest({ artifacts: [artifact("screenshot", "screenshot.png", shot)] }));
    const r = await verifyBundle(dir);
    expect(r.ok).toBe(false);
    expect(r.problems[0]).toMatch(/^screenshot\.png: .*40x50.*40x60/);

    // A landscape screenshot of a phone whose natural (wm size) display is portrait.
    const landscape = await png(60, 40);
    const m = manifest({ artifacts: [artifact("screenshot", "screenshot.png", landscape)] });
    m.device.display = { width: 40, height: 60, density: 420, rotation: 1 };
    await bundle({ "screenshot.png": landscape }, m);
    expect(await verifyBundle(dir)).toMatchObject({ ok: true });
    m.device.display = { width: 40, height: 60, density: 420, rotation: 0 };
    await bundle({}, m);
    expect((await verifyBundle(dir)).ok).toBe(false);
  });

  it("does not judge the content of a partial screenshot, which is kept for what it is", async () => {
    const junk = Buffer.from("\x89PNG cut short");
    await bundle({ "screenshot.partial.png": junk }, manifest({ status: "partial", artifacts: [artifact("screenshot", "screenshot.partial.png", junk, "partial")] }));
    expect(await verifyBundle(dir)).toMatchObject({ ok: true, checked: 1 });
  });
});

describe("verifyBundle: video bundles", () => {
  const videoManifest = (file: Buffer, actual: { width: number; height: number }, codec = "h264") =>
    manifest({
      kind: "video",
      device: { ...manifest({}).device, hierarchySource: null },
      artifacts: [artifact("video", "video.mp4", file)],
      video: {
        requestedDurationSeconds: 5,
        hostDurationMs: 1000,
        mediaDurationMs: 1000,
        requestedSize: actual,
        actualSize: actual,
        codec,
        stopReason: "requested",
        remotePath: "/data/local/tmp/v.mp4",
        remoteRetained: false,
      },
    });

  it("accepts a complete video that probes with the recorded codec and size", async () => {
    const mp4 = h264(64, 96);
    await bundle({ "video.mp4": mp4 }, videoManifest(mp4, { width: 64, height: 96 }));
    expect(await verifyBundle(dir)).toMatchObject({ ok: true, problems: [] });
  });

  it("refuses a complete video of another size or codec than recorded", async () => {
    const mp4 = h264(64, 96);
    await bundle({ "video.mp4": mp4 }, videoManifest(mp4, { width: 96, height: 64 }));
    const size = await verifyBundle(dir);
    expect(size.ok).toBe(false);
    expect(size.problems.join("\n")).toMatch(/video\.mp4: .*64x96.*96x64/);
    await bundle({}, videoManifest(mp4, { width: 64, height: 96 }, "hevc"));
    const codec = await verifyBundle(dir);
    expect(codec.problems.join("\n")).toMatch(/video\.mp4: .*h264.*hevc/);
  });

  it("refuses a complete video that is text, even with a matching size and sha256", async () => {
    const text = Buffer.from("not a movie\n".repeat(50));
    await bundle({ "video.mp4": text }, videoManifest(text, { width: 64, height: 96 }));
    const r = await verifyBundle(dir);
    expect(r.ok).toBe(false);
    expect(r.problems.join("\n")).toMatch(/^video\.mp4: /m);
    expect(await readFile(join(dir, "video.mp4"), "utf8")).toMatch(/^not a movie/);
  });
});
