import type { ServiceImpl } from "@connectrpc/connect";
import type { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { captureEvidence } from "../evidence/capture-command.js";
import { callContext } from "./call-context.js";
import type { AgentServiceDeps } from "./service-deps.js";

/** EvidenceService on this agent: captures. The store, its lists and pulls are the coordinator's. */
export function agentEvidenceService(deps: Pick<AgentServiceDeps, "watcher" | "evidence" | "log">): Pick<ServiceImpl<typeof EvidenceService>, "captureEvidence"> {
  return {
    captureEvidence(req, ctx) {
      return captureEvidence(req, callContext(ctx).commandId, deps.watcher, deps.evidence, deps.log);
    },
  };
}
