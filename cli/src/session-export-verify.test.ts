import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { verifyBundle } from "./bundle-verify.js";
import { legacyImageName, verifySessionExport, type SessionExportFile, type SessionExportManifest } from "./session-export-verify.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-session-export-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const sessionId = "5d6f2a9e-3c1b-4e8f-9a7d-2b4c6e8f0a1c";
const evidenceId = "7c122f86-0239-4be4-9aff-a41ec0e4c381";
const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");
const png = (width: number, height: number, g = 200) => sharp({ create: { width, height, channels: 3, background: { r: 10, g, b: 30 } } }).png().toBuffer();

interface Made {
  manifest: SessionExportManifest;
  before: string;
  after: string;
  legacy: string;
}

/** An export as `farm session export` writes it: two stored screenshots, a still's, a failed capture. */
async function makeExport(status: string | null = "SESSION_STATUS_PASSED"): Promise<Made> {
  const a = await png(40, 60, 100);
  const b = await png(40, 60, 220);
  const still = await png(40, 60, 50);
  const before = `images/${sha(a)}.png`;
  const after = `images/${sha(b)}.png`;
  const legacy = `images/${legacyImageName(evidenceId, "screenshot.png")}`;
  const timeline = {
    kind: "farm-session-timeline",
    schemaVersion: 1,
    sessionId,
    exportedAt: "2026-11-30T06:00:00.000Z",
    session: { sessionId, name: "checkout", ...(status === null ? {} : { status }), stepCount: 3 },
    steps: [
      {
        sessionId,
        sequence: 1,
        recordVersion: 2,
        method: "farm.v1.DeviceService/SendInput",
        action: "tap",
        description: "tap at (10, 20)",
        result: { ok: true },
        durationMs: 12,
        before: { sha256: sha(a), width: 40, height: 60, size: String(a.length), file: before },
        after: { sha256: sha(b), width: 40, height: 60, size: String(b.length), file: after },
      },
      {
        sessionId,
        sequence: 2,
        recordVersion: 2,
        method: "farm.v1.DeviceService/RunShell",
        action: "shell",
        description: "shell true",
        result: { ok: true, exitCode: 0 },
        durationMs: 30,
        before: { sha256: sha(b), width: 40, height: 60, size: String(b.length), file: after },
        after: { errorCode: "SCREENSHOT_TRANSFER_FAILED", errorMessage: "adb went away" },
      },
      { sessionId, sequence: 3, recordVersion: 1, action: "evidence", description: `still evidence ${evidenceId} (complete)`, result: { ok: true }, after: { evidenceId, path: "screenshot.png", file: legacy } },
    ],
  };
  const timelineBytes = Buffer.from(JSON.stringify(timeline, null, 2) + "\n");
  await mkdir(join(dir, "images"), { mode: 0o700 });
  const files: [string, Buffer, Partial<SessionExportFile>][] = [
    [before, a, { mimeType: "image/png", width: 40, height: 60 }],
    [after, b, { mimeType: "image/png", width: 40, height: 60 }],
    [legacy, still, { mimeType: "image/png", width: 40, height: 60 }],
    ["timeline.json", timelineBytes, { mimeType: "application/json" }],
  ];
  for (const [path, bytes] of files) await writeFile(join(dir, path), bytes);
  const manifest: SessionExportManifest = {
    kind: "farm-session-export",
    schemaVersion: 1,
    sessionId,
    exportedAt: "2026-11-30T06:00:00.000Z",
    files: files.map(([path, bytes, extra]) => ({ path, bytes: bytes.length, sha256: sha(bytes), mimeType: "", ...extra })),
  };
  await writeManifest(manifest);
  return { manifest, before, after, legacy };
}

const writeManifest = (m: SessionExportManifest) => writeFile(join(dir, "manifest.json"), JSON.stringify(m, null, 2));

describe("verifySessionExport", () => {
  it("accepts an intact export, also through verifyBundle (farm evidence verify)", async () => {
    await makeExport();
    const r = await verifySessionExport(dir);
    expect(r).toEqual({ ok: true, evidenceId: sessionId, status: "complete", checked: 4, problems: [] });
    expect(await verifyBundle(dir)).toEqual(r);
  });

  it("says an export of a session still recording is running, not complete: later steps are not in it", async () => {
    await makeExport("SESSION_STATUS_RUNNING");
    const r = await verifySessionExport(dir);
    expect(r).toEqual({ ok: true, evidenceId: sessionId, status: "running", checked: 4, problems: [] });
    expect(await verifyBundle(dir)).toEqual(r);
  });

  it("calls every ended session's export complete", async () => {
    for (const status of ["SESSION_STATUS_PASSED", "SESSION_STATUS_FAILED", "SESSION_STATUS_LEASE_ENDED"]) {
      await rm(dir, { recursive: true, force: true });
      await mkdir(dir);
      await makeExport(status);
      expect(await verifySessionExport(dir), status).toMatchObject({ ok: true, status: "complete" });
    }
  });

  it("reports a session status that is missing or unknown rather than guessing complete", async () => {
    await makeExport(null);
    expect(await verifySessionExport(dir)).toMatchObject({ ok: false, status: null, problems: ["timeline.json: session status null is not one a session has"] });
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir);
    await makeExport("SESSION_STATUS_PAUSED");
    expect(await verifySessionExport(dir)).toMatchObject({ ok: false, status: null, problems: ["timeline.json: session status \"SESSION_STATUS_PAUSED\" is not one a session has"] });
  });

  it("reports a changed byte as a sha256 mismatch", async () => {
    const { before } = await makeExport();
    const bytes = await readFile(join(dir, before));
    bytes[bytes.length - 20] = (bytes[bytes.length - 20] as number) ^ 0xff;
    await writeFile(join(dir, before), bytes);
    const r = await verifyBundle(dir);
    expect(r.ok).toBe(false);
    expect(r.problems).toHaveLength(1);
    expect(r.problems[0]).toMatch(new RegExp(`^${before.replace(".", "\\.")}: sha256 [0-9a-f]{64}, manifest says`));
  });

  it("reports a missing file", async () => {
    const { legacy } = await makeExport();
    await unlink(join(dir, legacy));
    const r = await verifySessionExport(dir);
    expect(r.ok).toBe(false);
    expect(r.problems).toEqual([`${legacy}: missing`]);
  });

  it("reports a file the manifest does not list, at the top or under images/", async () => {
    await makeExport();
    await writeFile(join(dir, "notes.txt"), "hello");
    await writeFile(join(dir, "images", "extra.png"), await png(4, 4));
    const r = await verifySessionExport(dir);
    expect(r.ok).toBe(false);
    expect(r.problems).toEqual(["images/extra.png: not listed in the manifest", "notes.txt: not listed in the manifest"]);
  });

  it("reports a PNG that decodes to another size than listed", async () => {
    const { manifest, legacy } = await makeExport();
    const small = await png(30, 20);
    await writeFile(join(dir, legacy), small);
    const entry = manifest.files.find((f) => f.path === legacy) as SessionExportFile;
    Object.assign(entry, { bytes: small.length, sha256: sha(small) });
    await writeManifest(manifest);
    const r = await verifySessionExport(dir);
    expect(r.ok).toBe(false);
    expect(r.problems).toEqual([`${legacy}: decodes to 30x20, the manifest lists 40x60`]);
  });

  it("refuses paths outside the export, and a timeline naming an unlisted image", async () => {
    const { manifest, after } = await makeExport();
    manifest.files.push({ path: "../escape.png", bytes: 1, sha256: sha("x"), mimeType: "image/png" }, { path: "images/../timeline.json", bytes: 1, sha256: sha("x"), mimeType: "application/json" });
    manifest.files = manifest.files.filter((f) => f.path !== after);
    await writeManifest(manifest);
    const r = await verifySessionExport(dir);
    expect(r.ok).toBe(false);
    expect(r.problems).toContain("../escape.png: not a plain export path (timeline.json or images/NAME)");
    expect(r.problems).toContain("images/../timeline.json: not a plain export path (timeline.json or images/NAME)");
    expect(r.problems).toContain(`timeline.json: step #1 after names ${after}, which the manifest does not list`);
    expect(r.problems).toContain(`${after}: not listed in the manifest`);
  });

  it("refuses a stored screenshot whose name is not its sha256", async () => {
    const { manifest, before } = await makeExport();
    const bytes = await readFile(join(dir, before));
    const renamed = `images/${"0".repeat(64)}.png`;
    await rm(join(dir, before));
    await writeFile(join(dir, renamed), bytes);
    for (const f of manifest.files) if (f.path === before) f.path = renamed;
    await writeManifest(manifest);
    const r = await verifySessionExport(dir);
    expect(r.problems).toContain(`${renamed}: a stored screenshot is named by its sha256, the manifest says ${sha(bytes)}`);
    expect(r.problems.some((p) => p.startsWith(`timeline.json: step #1 before names ${before}`))).toBe(true);
  });

  it("names no file for a failed capture; legacy names are plain or refused", async () => {
    await makeExport();
    expect((await verifySessionExport(dir)).ok).toBe(true);
    expect(legacyImageName(evidenceId, "screenshot.png")).toBe(`evidence-${evidenceId}-screenshot.png`);
    expect(legacyImageName(evidenceId, "../x")).toBeNull();
    expect(legacyImageName("", "screenshot.png")).toBeNull();
  });
});
