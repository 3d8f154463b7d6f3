import type { VideoSessionRow } from "./video-session-store.js";

/** The columns an upsert writes over a stored row: all but the key. */
export function videoSessionChanges(row: VideoSessionRow): Omit<VideoSessionRow, "sessionId"> {
  return {
    agentId: row.agentId,
    serial: row.serial,
    physicalId: row.physicalId,
    requestedBy: row.requestedBy,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    status: row.status,
    code: row.code,
    message: row.message,
    workerAvailable: row.workerAvailable,
    recoveryState: row.recoveryState,
    manifestJson: row.manifestJson,
  };
}
