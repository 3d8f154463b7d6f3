import type { ConnectRouter } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { agentDeviceService } from "./device-service.js";
import { agentVideoService } from "./video-service.js";
import { agentEvidenceService } from "./evidence-service.js";
import { agentControlService } from "./control-service.js";
import type { AgentServiceDeps } from "./service-deps.js";

/** The services the coordinator may call on this agent. A method left out answers NOT_IMPLEMENTED. */
export const agentServices: readonly DescService[] = [DeviceService, VideoService, EvidenceService, AgentControlService];

/** Registers the agent's services: the one place a routed method is wired. */
export function agentRoutes(deps: AgentServiceDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(DeviceService, agentDeviceService(deps));
    router.service(VideoService, agentVideoService(deps));
    router.service(EvidenceService, agentEvidenceService(deps));
    router.service(AgentControlService, agentControlService(deps));
  };
}
