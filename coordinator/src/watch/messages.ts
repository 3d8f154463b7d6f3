import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ActivityEntrySchema, type ActivityEntry } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { EvidenceSummarySchema, type EvidenceSummary } from "@farm/shared/gen/farm/v1/evidence_pb";
import { LeaseSchema, LeaseSelectorSchema, LeaseWaiterSchema, type Lease, type LeaseWaiter } from "@farm/shared/gen/farm/v1/lease_pb";
import { VideoSessionSchema, type VideoSession } from "@farm/shared/gen/farm/v1/video_service_pb";
import { SessionSchema, type Session } from "@farm/shared/gen/farm/v1/session_service_pb";
import type { ActivityRow } from "../activity/activity-log.js";
import type { EvidenceRow } from "../evidence/evidence-store.js";
import type { LeaseRow, Waiter } from "../leases/lease-store.js";
import type { SessionRow } from "../sessions/session-store.js";
import { sessionStatusOf } from "../sessions/session-status.js";
import type { VideoSessionRow } from "../video/video-session-index.js";

/** Wire forms of stored rows, shared by the list RPCs and the watch stream. */

export function leaseMessage(row: LeaseRow, agentName: string): Lease {
  return create(LeaseSchema, {
    leaseId: row.leaseId,
    holder: row.holder,
    physicalId: row.physicalId,
    agentId: row.agentId,
    agentName,
    serial: row.serial,
    acquireTime: timestampFromMs(row.acquiredAt),
    expireTime: timestampFromMs(row.expiresAt),
    ttlMs: row.ttlMs,
  });
}

export function waiterMessage(w: Waiter): LeaseWaiter {
  return create(LeaseWaiterSchema, {
    ticket: w.ticket,
    holder: w.holder,
    selector: create(LeaseSelectorSchema, w.selector),
    enqueueTime: timestampFromMs(w.enqueuedAt),
    waitDeadline: timestampFromMs(w.waitDeadline),
  });
}

export function evidenceMessage(row: EvidenceRow, agentName: string): EvidenceSummary {
  return create(EvidenceSummarySchema, {
    evidenceId: row.evidenceId,
    kind: row.kind,
    status: row.status,
    ...(row.label === null ? {} : { label: row.label }),
    serial: row.serial,
    physicalId: row.physicalId,
    agentId: row.agentId,
    agentName,
    createTime: timestampFromMs(row.createdAt),
    totalBytes: BigInt(row.totalBytes),
    manifestSha256: row.manifestSha256,
  });
}

export function activityMessage(row: ActivityRow): ActivityEntry {
  return create(ActivityEntrySchema, { ...row, id: BigInt(row.id), time: timestampFromMs(row.at) });
}

export function videoSessionMessage(row: VideoSessionRow, agentName: string, stored: boolean): VideoSession {
  return create(VideoSessionSchema, {
    sessionId: row.sessionId,
    status: row.status,
    workerAvailable: row.workerAvailable,
    code: row.code,
    message: row.message,
    manifestJson: row.manifestJson,
    serial: row.serial,
    physicalId: row.physicalId,
    agentId: row.agentId,
    agentName,
    stored,
    recoveryState: row.recoveryState,
    createTime: timestampFromMs(row.createdAt),
    updateTime: timestampFromMs(row.updatedAt),
  });
}

export function sessionMessage(row: SessionRow, agentName: string): Session {
  return create(SessionSchema, {
    sessionId: row.sessionId,
    name: row.name,
    physicalId: row.physicalId,
    serial: row.serial,
    agentId: row.agentId,
    agentName,
    leaseId: row.leaseId,
    owner: row.owner,
    status: sessionStatusOf(row.status),
    createTime: timestampFromMs(row.createdAt),
    ...(row.endedAt === null ? {} : { endTime: timestampFromMs(row.endedAt) }),
    stepCount: row.stepCount,
    failedStepCount: row.failedStepCount,
    context: row.context,
    ocr: row.ocr,
    policyJson: row.policyJson,
    policySha256: row.policySha256,
    secretNames: row.secretNames,
  });
}
