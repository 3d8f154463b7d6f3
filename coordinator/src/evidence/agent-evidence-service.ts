import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { AgentEvidenceService, UploadEvidenceResponseSchema, type UploadEvidenceStart } from "@farm/shared/gen/farm/v1/agent_evidence_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import type { EvidenceGrant, EvidenceGrants } from "./evidence-grants.js";
import type { EvidenceStore, Upload } from "./evidence-store.js";
import { bundleMaxBytes, EVIDENCE_FILE_MAX_BYTES } from "../http/message-limits.js";
import type { EvidenceQuota } from "./evidence-quota.js";

/**
 * Receives bundles that agents staged; see EvidenceStore for the checks on
 * the bytes. Before any byte: the evidence id must have been issued to this
 * agent (token and id) for this device (EvidenceGrants). A bundle already
 * stored is answered as stored only to an upload announcing the same
 * manifest sha256; any other is ALREADY_EXISTS, never a second copy.
 */
export function registerAgentEvidenceService(router: ConnectRouter, deps: { store: EvidenceStore; grants: EvidenceGrants; quota?: EvidenceQuota | undefined; log: Logger }): void {
  router.service(AgentEvidenceService, {
    async uploadEvidence(requests, ctx) {
      const principal = requirePrincipal(ctx);
      let upload: Upload | undefined;
      let announced = 0;
      let grant: EvidenceGrant | undefined;
      // What the bundle's capture holds of the quota, while it holds it.
      let reserved: number | undefined;
      try {
        for await (const msg of requests) {
          switch (msg.kind.case) {
            case "start": {
              if (upload || grant) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "start sent twice");
              const s = msg.kind.value;
              grant = await authorize(s, principal.tokenName);
              const stored = await deps.store.get(grant.evidenceId);
              if (stored) {
                if (s.manifestSha256 !== "" && s.manifestSha256 === stored.manifestSha256) {
                  return create(UploadEvidenceResponseSchema, { evidenceId: stored.evidenceId, totalBytes: BigInt(stored.totalBytes), manifestSha256: stored.manifestSha256, alreadyStored: true });
                }
                throw farmError(Errors.ALREADY_EXISTS, `evidence ${grant.evidenceId} is already stored with another manifest (sha256 ${stored.manifestSha256}); it is never replaced`, "evidence_id");
              }
              if (deps.store.receiving.has(grant.evidenceId)) {
                throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `evidence ${grant.evidenceId} is being received on another stream; try again when it ends`, "evidence_id");
              }
              // A bundle whose reservation is gone (expired, or released with its capture) is capped by
              // its kind alone: a staged bundle sent again after a restart was captured under a grant
              // and is still the issuer's to store.
              reserved = await deps.quota?.held(grant.evidenceId);
              upload = await deps.store.beginUpload({ evidenceId: grant.evidenceId, kind: grant.kind, serial: grant.serial, physicalId: grant.physicalId || s.physicalId, agentId: grant.agentId });
              break;
            }
            case "file":
              if (!upload || !grant) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "file before start");
              announced = checkAnnouncedSize(Number(msg.kind.value.size), announced, bundleMaxBytes(grant.kind), reserved, grant);
              await upload.startFile(msg.kind.value.path, Number(msg.kind.value.size), msg.kind.value.sha256);
              break;
            case "chunk":
              if (!upload) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "chunk before start");
              await upload.chunk(msg.kind.value);
              break;
            case "manifestJson": {
              if (!upload || !grant) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "manifest before start");
              checkManifestClaims(msg.kind.value, grant);
              const row = await upload.finish(msg.kind.value);
              deps.log.info("evidence stored", { evidenceId: row.evidenceId, status: row.status, bytes: row.totalBytes });
              upload = undefined;
              // Stored: the bytes count as stored now, not as reserved (a recording's settles here).
              await deps.quota?.release(row.evidenceId);
              return create(UploadEvidenceResponseSchema, { evidenceId: row.evidenceId, totalBytes: BigInt(row.totalBytes), manifestSha256: row.manifestSha256 });
            }
            default:
              break;
          }
        }
        throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "the upload ended before its manifest");
      } finally {
        // Anything not published is discarded; the agent keeps its staged copy.
        if (upload) await upload.abort();
      }
    },
  });

  async function authorize(s: UploadEvidenceStart, tokenName: string): Promise<EvidenceGrant> {
    try {
      return await deps.grants.authorize(s, tokenName);
    } catch (err) {
      // An agent uploading what it was not given is worth an operator's look.
      deps.log.warn("evidence upload refused", { evidenceId: s.evidenceId, principal: tokenName, agentId: s.agentId, serial: s.serial, code: toErrorReport(err).code, error: (err as Error).message });
      throw err;
    }
  }
}

/**
 * Per-file and per-bundle caps, checked against what a file header
 * announces before its bytes: the bundle's kind's largest size, and what
 * its capture holds of the user's quota (`reserved`), which is less when
 * less was left.
 */
function checkAnnouncedSize(size: number, before: number, bundleMax: number, reserved: number | undefined, grant: EvidenceGrant): number {
  if (!Number.isSafeInteger(size) || size < 0 || size > EVIDENCE_FILE_MAX_BYTES) {
    throw farmError(Errors.MESSAGE_TOO_LARGE, `an evidence file is at most ${EVIDENCE_FILE_MAX_BYTES} bytes; this one announces ${size}`, "size");
  }
  if (before + size > bundleMax) {
    throw farmError(Errors.MESSAGE_TOO_LARGE, `an evidence bundle of this kind is at most ${bundleMax} bytes; its files announce ${before + size}`, "size");
  }
  if (reserved !== undefined && before + size > reserved) {
    throw farmError(
      Errors.QUOTA_EXCEEDED,
      `evidence ${grant.evidenceId}: its files announce ${before + size} bytes, more than the ${reserved} bytes left of ${grant.requestedBy}'s evidence quota when the ${
        grant.kind === "video" ? "recording" : "capture"
      } started (coordinator --evidence-quota); it is not stored`,
      "quota",
    );
  }
  return before + size;
}

/** The manifest must describe the bundle that was issued: its kind and its device. */
function checkManifestClaims(text: string, grant: EvidenceGrant): void {
  let m: { kind?: unknown; device?: { serial?: unknown } } | null;
  try {
    m = JSON.parse(text) as typeof m;
  } catch {
    return; // the store reports a manifest that is not JSON
  }
  if (m?.kind !== grant.kind || m.device?.serial !== grant.serial) {
    throw farmError(
      Errors.EVIDENCE_NOT_ISSUED,
      `evidence ${grant.evidenceId}: the manifest describes a ${String(m?.kind)} bundle of ${String(m?.device?.serial)}; it was issued for a ${grant.kind} bundle of ${grant.serial}`,
      "manifest_json",
    );
  }
}
