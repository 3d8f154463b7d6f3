import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { evidenceManifestSchema } from "./evidence-manifest.js";
import { manifestSchemaErrors } from "./evidence-manifest-validate.js";

const doc = fileURLToPath(new URL("../../docs/evidence-manifest.schema.json", import.meta.url));

const valid = {
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
    display: { width: 1080, height: 2400, density: 420, rotation: 0 },
  },
  startedAt: "2026-11-30T05:59:35.628Z",
  finishedAt: "2026-11-30T05:59:35.755Z",
  status: "complete",
  artifacts: [],
  errors: [],
};

describe("evidence manifest schema", () => {
  it("is published in docs/ exactly as the code validates with", () => {
    expect(JSON.parse(readFileSync(doc, "utf8"))).toEqual(JSON.parse(JSON.stringify(evidenceManifestSchema)));
  });

  it("accepts a valid manifest and names what is wrong with others", () => {
    expect(manifestSchemaErrors(valid)).toEqual([]);
    expect(manifestSchemaErrors({ ...valid, status: "compleat" }).join()).toContain("/status");
    expect(manifestSchemaErrors({ ...valid, schemaVersion: 2 }).join()).toContain("/schemaVersion");
    expect(
      manifestSchemaErrors({
        ...valid,
        artifacts: [{ kind: "screenshot", path: "../x", mimeType: "image/png", status: "complete", bytes: 1, sha256: "0".repeat(64), startedAt: valid.startedAt, finishedAt: valid.finishedAt, durationMs: 1, commandId: null, taskId: null }],
      }).join(),
    ).toContain("/artifacts/0/path");
  });
});

describe("video manifests", () => {
  const video = {
    requestedDurationSeconds: 30,
    hostDurationMs: null,
    mediaDurationMs: null,
    requestedSize: { width: 576, height: 1280 },
    actualSize: null,
    codec: null,
    stopReason: null,
    remotePath: "/data/local/tmp/farm-video-x.mp4",
    remoteRetained: true,
  };
  const active = { ...valid, kind: "video", finishedAt: null, status: "partial", device: { ...valid.device, hierarchySource: null }, video };

  it("accepts an active recording (no finish time, no stop reason) and a finished one", () => {
    expect(manifestSchemaErrors(active)).toEqual([]);
    const done = {
      ...active,
      finishedAt: valid.finishedAt,
      status: "complete",
      video: { ...video, hostDurationMs: 30012.5, mediaDurationMs: 29950, actualSize: { width: 576, height: 1280 }, codec: "h264", stopReason: "duration_cap", remoteRetained: false },
    };
    expect(manifestSchemaErrors(done)).toEqual([]);
  });

  it("needs the video block on video bundles only, with a known stop reason", () => {
    expect(manifestSchemaErrors({ ...active, video: undefined }).join()).toMatch(/video/);
    expect(manifestSchemaErrors({ ...valid, video }).length).toBeGreaterThan(0);
    expect(manifestSchemaErrors({ ...active, video: { ...video, stopReason: "bored" } }).join()).toContain("/video/stopReason");
    expect(manifestSchemaErrors({ ...active, video: { ...video, requestedDurationSeconds: 181 } }).join()).toContain("/video/requestedDurationSeconds");
  });
});
