import type { EvidenceArtifact, EvidenceError, EvidenceManifest, EvidenceStatus, EvidenceVideo } from "@farm/shared/evidence-manifest";
import type { VideoSessionRecord } from "./video-session-files.js";

/** The video block of a session that has recorded nothing yet. */
export function initialVideo(rec: VideoSessionRecord): EvidenceVideo {
  return {
    requestedDurationSeconds: rec.durationSeconds,
    hostDurationMs: null,
    mediaDurationMs: null,
    requestedSize: rec.requestedSize,
    actualSize: null,
    codec: null,
    stopReason: null,
    remotePath: rec.remotePath,
    remoteRetained: true,
  };
}

/** A video bundle's manifest: the session's fixed facts plus what happened. */
export function videoManifest(
  rec: VideoSessionRecord,
  parts: { startedAt: string; finishedAt: string | null; status: EvidenceStatus; artifacts: EvidenceArtifact[]; errors: EvidenceError[]; video: EvidenceVideo },
): EvidenceManifest {
  return {
    schemaVersion: 1,
    evidenceId: rec.sessionId,
    kind: "video",
    label: rec.label,
    context: rec.context,
    device: rec.device,
    startedAt: parts.startedAt,
    finishedAt: parts.finishedAt,
    status: parts.status,
    artifacts: parts.artifacts,
    errors: [...parts.errors],
    video: { ...parts.video },
  };
}
