/**
 * "Complete means complete" for still bundles, end to end (real adb server,
 * simulated phones, `farm standalone`, the CLI): missing metadata makes a
 * bundle partial, a screenshot stream cut by a vanishing phone is never
 * recorded as a successful transfer, and the documented minimum budget
 * (`--timeout 1000`) can still give a complete bundle on a fast phone.
 */
import { mkdir, readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimDevice } from "../devsim/index.js";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

interface Artifact {
  kind: string;
  path: string | null;
  status: string;
  error?: { code: string; stage: string };
}
interface Manifest {
  status: string;
  device: { display: { width: number; height: number; density: number | null; rotation: number | null } | null };
  artifacts: Artifact[];
  errors: { code: string; stage: string; message: string }[];
}
interface Captures {
  captures: { screenshot: { result: { ok: boolean; bytes: number; error: { code: string } | null } } };
}

let lab: Lab;
let phone: { device: SimDevice; serial: string };

const out = (name: string) => join(lab.dir.path, "out", name);
const manifestOf = async (dir: string) => JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as Manifest;

beforeAll(async () => {
  lab = await startLab("evidence-complete");
  await mkdir(join(lab.dir.path, "out"));
  phone = await lab.addDevice({ serialno: "COMPLETE01" });
});

afterAll(async () => {
  await lab?.stop();
});

describe("missing metadata", () => {
  for (const [fault, field] of [["densityUnavailable", "density"], ["rotationUnavailable", "rotation"]] as const) {
    it(`makes an otherwise usable capture partial when the display ${field} cannot be read`, async () => {
      phone.device.faults.set({ [fault]: true });
      try {
        const dir = out(`no-${field}`);
        const r = await farm(["evidence", "capture", "--device", phone.serial, "--output-dir", dir], lab.env);
        expect(r.code).toBe(69);
        expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED", status: "partial" });
        const m = await manifestOf(dir);
        expect(m.status).toBe("partial");
        // The screenshot and hierarchy themselves are fine: only metadata is missing.
        expect(m.artifacts.find((a) => a.kind === "screenshot")?.status).toBe("complete");
        expect(m.artifacts.find((a) => a.kind === "hierarchy")?.status).toBe("complete");
        expect(m.device.display).not.toBeNull();
        expect(m.device.display?.[field]).toBeNull();
        expect(m.errors).toContainEqual(expect.objectContaining({ code: "METADATA_UNAVAILABLE", stage: "metadata" }));
        expect((await farm(["evidence", "verify", dir], lab.env)).code).toBe(0);
      } finally {
        phone.device.faults.set({ [fault]: null });
      }
    });
  }
});

describe("a screenshot stream cut by a vanishing phone", () => {
  it("is recorded as a failed transfer in captures.json and the manifest, never ok", async () => {
    const flaky = await lab.addDevice({ serialno: "CUTSTREAM1" });
    // Slow enough that the vanish lands in the middle of the PNG bytes.
    flaky.device.faults.set({ bandwidthBytesPerSec: 20_000 });
    const dir = out("cut");
    const pending = farm(["evidence", "capture", "--device", flaky.serial, "--output-dir", dir, "--timeout", "20000"], lab.env);
    await new Promise((r) => setTimeout(r, 1_000));
    await flaky.device.vanish();
    const r = await pending;
    expect(r.code).toBe(69);
    expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED" });
    const m = await manifestOf(dir);
    expect(m.status).not.toBe("complete");
    const shot = m.artifacts.find((a) => a.kind === "screenshot");
    expect(shot?.status).not.toBe("complete");
    // What failed is the transfer, not (only) the PNG it left behind.
    expect(shot?.error?.code).toMatch(/^(DEVICE_OFFLINE|SCREENSHOT_TRANSFER_FAILED)$/);
    const names = await readdir(dir);
    expect(names).not.toContain("screenshot.png");
    const captures = JSON.parse(await readFile(join(dir, "captures.json"), "utf8")) as Captures;
    expect(captures.captures.screenshot.result.ok).toBe(false);
    expect(captures.captures.screenshot.result.error).not.toBeNull();
  });
});

describe("--timeout 1000, the documented minimum", () => {
  it("gives a complete bundle on a fast phone", async () => {
    const dir = out("one-second");
    const r = await farm(["evidence", "capture", "--device", phone.serial, "--output-dir", dir, "--timeout", "1000"], lab.env);
    const m = await manifestOf(dir);
    expect(m.errors).toEqual([]);
    expect(r.json).toMatchObject({ ok: true, status: "complete" });
    expect(r.code).toBe(0);
  });
});
