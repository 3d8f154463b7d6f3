import type { ErrorCode } from "./errors.js";

/** Bundle manifest, schema version 1. Written last; never hashes itself. */
export interface EvidenceManifest {
  schemaVersion: 1;
  evidenceId: string;
  kind: "still" | "video";
  label: string | null;
  context: Record<string, unknown>;
  device: EvidenceDevice;
  startedAt: string;
  finishedAt: string | null;
  status: EvidenceStatus;
  artifacts: EvidenceArtifact[];
  errors: EvidenceError[];
  /** Present on video bundles only. */
  video?: EvidenceVideo;
}

/** A video bundle's recording facts; host and media durations are independent. */
export interface EvidenceVideo {
  requestedDurationSeconds: number;
  /** Monotonic host time from recorder start to its observed end; null while recording. */
  hostDurationMs: number | null;
  /** The decoded media timeline; null until probed. */
  mediaDurationMs: number | null;
  requestedSize: { width: number; height: number };
  actualSize: { width: number; height: number } | null;
  codec: string | null;
  stopReason: "requested" | "duration_cap" | "startup_failure" | "failure" | null;
  /** Device path of the recording; kept after a failure for recovery. */
  remotePath: string;
  /** False once the remote file was removed (after successful verification). */
  remoteRetained: boolean;
}

export type EvidenceStatus = "complete" | "partial" | "failed";

export interface EvidenceDevice {
  serial: string;
  physicalId: string | null;
  agentId: string;
  agentHost: string;
  cliVersion: string | null;
  agentVersion: string;
  bootId: string | null;
  appPackage: string | null;
  /** Null on video bundles, which have no hierarchy. */
  hierarchySource: "uiautomator" | "app-sdk" | null;
  apiLevel: number | null;
  androidVersion: string | null;
  manufacturer: string | null;
  model: string | null;
  deviceType: "emulator" | "physical" | "unknown";
  deviceTypeProperties: { "ro.kernel.qemu": string | null; "ro.boot.qemu": string | null };
  display: { width: number; height: number; density: number | null; rotation: number | null } | null;
}

export type ArtifactKind = "screenshot" | "hierarchy" | "capture_envelopes" | "video" | "encoder_stderr";

export interface EvidenceArtifact {
  kind: ArtifactKind;
  path: string | null;
  mimeType: string;
  status: "complete" | "partial" | "failed";
  bytes: number | null;
  sha256: string | null;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  commandId: string | null;
  taskId: string | null;
  error?: EvidenceError;
}

/**
 * Why an artifact is partial or missing. These are artifact errors inside a
 * manifest, not RPC errors; a capture step that failed with an RPC error
 * (the app SDK's, a timeout) keeps that error's code.
 */
export type ManifestErrorCode =
  | "SCREENSHOT_EMPTY"
  | "SCREENSHOT_NOT_PNG"
  | "SCREENSHOT_INVALID_PNG"
  | "SCREENSHOT_TOO_LARGE"
  | "SCREENSHOT_COMMAND_FAILED"
  | "SCREENSHOT_TRANSFER_FAILED"
  | "HIERARCHY_DUMP_FAILED"
  | "HIERARCHY_INVALID"
  | "HIERARCHY_TOO_LARGE"
  | "HIERARCHY_COMMAND_FAILED"
  | "HIERARCHY_TRANSFER_FAILED"
  | "DEVICE_ASLEEP"
  | "DEVICE_LOCKED"
  | "METADATA_UNAVAILABLE"
  | "VIDEO_STARTUP_FAILED"
  | "VIDEO_RECORDER_OVERDUE"
  | "VIDEO_RECORDER_IDENTITY_MISMATCH"
  | "VIDEO_RECORDER_UNRESPONSIVE"
  | "VIDEO_RECORDER_FAILED"
  | "VIDEO_STOP_UNCERTAIN"
  | "VIDEO_PULL_FAILED"
  | "VIDEO_EMPTY"
  | "VIDEO_PROBE_FAILED"
  | "VIDEO_DECODE_FAILED"
  | "VIDEO_SIZE_MISMATCH"
  | "ENCODER_STDERR_TRUNCATED"
  /** An evidence file the disk could not hold (full, quota, I/O error, short write). */
  | "EVIDENCE_STORAGE_FAILED"
  | "RECEIPT_WRITE_FAILED"
  | ErrorCode;

export interface EvidenceError {
  code: ManifestErrorCode;
  stage: string;
  message: string;
  component: string | null;
}

const nullable = (schema: Record<string, unknown>) => ({ anyOf: [schema, { type: "null" }] });
const isoTime = { type: "string", pattern: "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z$" };
const sha256 = { type: "string", pattern: "^[0-9a-f]{64}$" };
const sizeSchema = {
  type: "object",
  additionalProperties: false,
  required: ["width", "height"],
  properties: { width: { type: "integer", minimum: 1 }, height: { type: "integer", minimum: 1 } },
};
const errorSchema = {
  type: "object",
  additionalProperties: false,
  required: ["code", "stage", "message", "component"],
  properties: { code: { type: "string", minLength: 1 }, stage: { type: "string" }, message: { type: "string" }, component: nullable({ type: "string" }) },
};

/** The published JSON Schema (docs/evidence-manifest.schema.json is generated from it). */
export const evidenceManifestSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: "https://farm.dev/schemas/evidence-manifest-v1.json",
  title: "farm evidence bundle manifest, schema version 1",
  type: "object",
  additionalProperties: false,
  required: ["schemaVersion", "evidenceId", "kind", "label", "context", "device", "startedAt", "finishedAt", "status", "artifacts", "errors"],
  properties: {
    schemaVersion: { const: 1 },
    evidenceId: { type: "string", pattern: "^[0-9a-f-]{36}$" },
    kind: { enum: ["still", "video"] },
    label: nullable({ type: "string", maxLength: 4096 }),
    context: { type: "object" },
    device: {
      type: "object",
      additionalProperties: false,
      required: [
        "serial",
        "physicalId",
        "agentId",
        "agentHost",
        "cliVersion",
        "agentVersion",
        "bootId",
        "appPackage",
        "hierarchySource",
        "apiLevel",
        "androidVersion",
        "manufacturer",
        "model",
        "deviceType",
        "deviceTypeProperties",
        "display",
      ],
      properties: {
        serial: { type: "string", minLength: 1 },
        physicalId: nullable({ type: "string" }),
        agentId: { type: "string" },
        agentHost: { type: "string" },
        cliVersion: nullable({ type: "string" }),
        agentVersion: { type: "string" },
        bootId: nullable({ type: "string" }),
        appPackage: nullable({ type: "string" }),
        hierarchySource: { enum: ["uiautomator", "app-sdk", null] },
        apiLevel: nullable({ type: "integer", minimum: 1 }),
        androidVersion: nullable({ type: "string" }),
        manufacturer: nullable({ type: "string" }),
        model: nullable({ type: "string" }),
        deviceType: { enum: ["emulator", "physical", "unknown"] },
        deviceTypeProperties: {
          type: "object",
          additionalProperties: false,
          required: ["ro.kernel.qemu", "ro.boot.qemu"],
          properties: { "ro.kernel.qemu": nullable({ type: "string" }), "ro.boot.qemu": nullable({ type: "string" }) },
        },
        display: nullable({
          type: "object",
          additionalProperties: false,
          required: ["width", "height", "density", "rotation"],
          properties: {
            width: { type: "integer", minimum: 1 },
            height: { type: "integer", minimum: 1 },
            density: nullable({ type: "integer", minimum: 1 }),
            rotation: nullable({ type: "integer", minimum: 0, maximum: 3 }),
          },
        }),
      },
    },
    startedAt: isoTime,
    finishedAt: nullable(isoTime),
    status: { enum: ["complete", "partial", "failed"] },
    artifacts: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["kind", "path", "mimeType", "status", "bytes", "sha256", "startedAt", "finishedAt", "durationMs", "commandId", "taskId"],
        properties: {
          kind: { enum: ["screenshot", "hierarchy", "capture_envelopes", "video", "encoder_stderr"] },
          path: nullable({ type: "string", pattern: "^[A-Za-z0-9._-]+$", not: { const: "manifest.json" } }),
          mimeType: { type: "string" },
          status: { enum: ["complete", "partial", "failed"] },
          bytes: nullable({ type: "integer", minimum: 0 }),
          sha256: nullable(sha256),
          startedAt: isoTime,
          finishedAt: isoTime,
          durationMs: { type: "number", minimum: 0 },
          commandId: nullable({ type: "string" }),
          taskId: nullable({ type: "string" }),
          error: errorSchema,
        },
      },
    },
    errors: { type: "array", items: errorSchema },
    video: {
      type: "object",
      additionalProperties: false,
      required: ["requestedDurationSeconds", "hostDurationMs", "mediaDurationMs", "requestedSize", "actualSize", "codec", "stopReason", "remotePath", "remoteRetained"],
      properties: {
        requestedDurationSeconds: { type: "integer", minimum: 1, maximum: 180 },
        hostDurationMs: nullable({ type: "number", minimum: 0 }),
        mediaDurationMs: nullable({ type: "number", minimum: 0 }),
        requestedSize: sizeSchema,
        actualSize: nullable(sizeSchema),
        codec: nullable({ type: "string" }),
        stopReason: { enum: ["requested", "duration_cap", "startup_failure", "failure", null] },
        remotePath: { type: "string" },
        remoteRetained: { type: "boolean" },
      },
    },
  },
  if: { properties: { kind: { const: "video" } } },
  then: { required: ["video"] },
  else: { not: { required: ["video"] } },
} as const;
