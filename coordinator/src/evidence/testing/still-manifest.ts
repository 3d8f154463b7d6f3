import { createHash } from "node:crypto";

const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** A valid still manifest listing one screenshot. */
export function stillManifest(evidenceId: string, png: Buffer, label: string | null = "smoke"): string {
  const at = "2026-11-30T05:59:35.628Z";
  return JSON.stringify({
    schemaVersion: 1,
    evidenceId,
    kind: "still",
    label,
    context: {},
    device: {
      serial: "s1",
      physicalId: "p1",
      agentId: "a1",
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
      display: { width: 1080, height: 2400, density: 420, rotation: 0 },
    },
    startedAt: at,
    finishedAt: at,
    status: "complete",
    artifacts: [{ kind: "screenshot", path: "screen.png", mimeType: "image/png", status: "complete", bytes: png.length, sha256: sha256(png), startedAt: at, finishedAt: at, durationMs: 1, commandId: null, taskId: null }],
    errors: [],
  });
}
