import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { toCommandError } from "@farm/shared/command-error";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import { StepShotSchema, type StepShot } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { EvidenceDeps } from "../evidence/capture-command.js";
import { checkPng } from "../evidence/png-check.js";
import { screencap } from "../evidence/take-screenshot.js";
import type { DeviceOwnership } from "../ownership/device-ownership.js";
import { putBlobBytes } from "../uplink/blob-transfer.js";

/** The bytes of one screen capture, taken but not yet checked or sent; or why there are none. */
export type RawShot = { captureTime: Timestamp; bytes: Buffer; sha256: string } | { captureTime: Timestamp; error: unknown };

/**
 * Takes the screenshots around a session step in two parts, so that only
 * the capture itself sits next to the action: `capture` grabs the screen,
 * `settle` checks the PNG and uploads it (unless the coordinator already has
 * that screen), which can run while the action does.
 */
export interface StepShooter {
  capture(serial: string, untilMs: number): Promise<RawShot>;
  /** Never throws: a capture or upload that failed is a shot with its error. */
  settle(raw: RawShot, known: ReadonlySet<string>): Promise<StepShot>;
}

export function stepShooter(deps: { ownership: DeviceOwnership; evidence: EvidenceDeps }): StepShooter {
  return {
    async capture(serial, untilMs) {
      const captureTime = timestampNow();
      try {
        const bytes = await screencap(serial, untilMs, deps);
        return { captureTime, bytes, sha256: createHash("sha256").update(bytes).digest("hex") };
      } catch (error) {
        return { captureTime, error };
      }
    },
    async settle(raw, known) {
      try {
        if ("error" in raw) throw raw.error;
        const base = { sha256: raw.sha256, size: BigInt(raw.bytes.length), captureTime: raw.captureTime };
        // These bytes were checked when first sent: only the size is read again.
        if (known.has(raw.sha256)) return create(StepShotSchema, { ...base, width: raw.bytes.readUInt32BE(16), height: raw.bytes.readUInt32BE(20) });
        const check = await checkPng(raw.bytes);
        if (!check.ok) throw farmError(Errors[check.code], check.message);
        const blob = await putBlobBytes(deps.evidence.transport, deps.evidence.stagingDir, raw.bytes, "step.png");
        return create(StepShotSchema, { ...base, width: check.width, height: check.height, blobId: blob.blobId });
      } catch (err) {
        return create(StepShotSchema, { captureTime: raw.captureTime, error: toCommandError(toErrorReport(err), err) });
      }
    },
  };
}
