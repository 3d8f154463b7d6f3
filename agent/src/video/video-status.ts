import { Errors } from "@farm/shared/errors";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import type { VideoSessionRecord } from "./video-session-files.js";

export interface VideoStatus {
  status: string;
  code: string;
  message: string;
}

/**
 * A session's status as the API reports it, from what its files say: the
 * published manifest wins; without one, a live worker's state; without
 * either, a failure that needs recovery (or was released). `extra` is what
 * the caller already knows went wrong (it keeps its code and message).
 */
export function videoStatus(
  rec: Pick<VideoSessionRecord, "sessionId" | "state" | "recoveryState" | "recoveryReason">,
  manifest: EvidenceManifest | null,
  workerAlive: boolean,
  extra: { code?: string; message?: string },
): VideoStatus {
  let status: string;
  let code = extra.code ?? "";
  let message = extra.message ?? "";
  if (manifest?.finishedAt) {
    status = manifest.status;
    if (!code && rec.recoveryState === "recovery_required") {
      code = Errors.EVIDENCE_RECOVERY_REQUIRED.code;
      message = rec.recoveryReason ?? "";
    } else if (!code && status !== "complete") {
      code = Errors.EVIDENCE_CAPTURE_FAILED.code;
      message = manifest.errors.map((e) => `${e.stage}: ${e.code}`).join(", ");
    }
  } else if (workerAlive) {
    status = rec.state === "terminal" ? "finalizing" : rec.state;
  } else {
    // The worker is gone before publishing: its last manifest and the lock stay.
    status = "failed";
    if (!code) {
      code = rec.recoveryState === "released" ? Errors.EVIDENCE_CAPTURE_FAILED.code : Errors.EVIDENCE_RECOVERY_REQUIRED.code;
      message = rec.recoveryState === "released"
        ? `the worker died before finishing; ${rec.recoveryReason ?? "released"}`
        : `the recording worker is gone (no heartbeat); the lock is kept. Inspect with \`farm evidence video inspect --session ${rec.sessionId}\``;
    }
  }
  return { status, code, message };
}
