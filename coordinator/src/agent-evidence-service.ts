import { Code, type ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorCodes, farmError } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { AgentEvidenceService, UploadEvidenceResponseSchema } from "@farm/shared/gen/farm/v1/agent_evidence_service_pb";
import type { EvidenceStore, Upload } from "./evidence-store.js";

/** Receives bundles that agents staged; see EvidenceStore for the checks. */
export function registerAgentEvidenceService(router: ConnectRouter, deps: { store: EvidenceStore; log: Logger }): void {
  router.service(AgentEvidenceService, {
    async uploadEvidence(requests) {
      let upload: Upload | undefined;
      try {
        for await (const msg of requests) {
          switch (msg.kind.case) {
            case "start": {
              if (upload) throw farmError(Code.InvalidArgument, ErrorCodes.evidenceTransferFailed, "start sent twice");
              const s = msg.kind.value;
              upload = deps.store.beginUpload({ evidenceId: s.evidenceId, kind: s.kind, serial: s.serial, physicalId: s.physicalId, agentId: s.agentId });
              break;
            }
            case "file":
              if (!upload) throw farmError(Code.InvalidArgument, ErrorCodes.evidenceTransferFailed, "file before start");
              await upload.startFile(msg.kind.value.path, Number(msg.kind.value.size), msg.kind.value.sha256);
              break;
            case "chunk":
              if (!upload) throw farmError(Code.InvalidArgument, ErrorCodes.evidenceTransferFailed, "chunk before start");
              await upload.chunk(msg.kind.value);
              break;
            case "manifestJson": {
              if (!upload) throw farmError(Code.InvalidArgument, ErrorCodes.evidenceTransferFailed, "manifest before start");
              const row = await upload.finish(msg.kind.value);
              deps.log.info("evidence stored", { evidenceId: row.evidenceId, status: row.status, bytes: row.totalBytes });
              upload = undefined;
              return create(UploadEvidenceResponseSchema, { evidenceId: row.evidenceId, totalBytes: BigInt(row.totalBytes) });
            }
            default:
              break;
          }
        }
        throw farmError(Code.InvalidArgument, ErrorCodes.evidenceTransferFailed, "the upload ended before its manifest");
      } finally {
        // Anything not published is discarded; the agent keeps its staged copy.
        if (upload) await upload.abort();
      }
    },
  });
}
