import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { agentDeviceService } from "./device-service.js";
import { agentVideoService } from "./video-service.js";
import { agentEvidenceService } from "./evidence-service.js";
import { agentControlService } from "./control-service.js";
import type { AgentServiceDeps } from "./service-deps.js";

/** One service the agent serves: its descriptor and (part of) its implementation. */
export interface ServiceRoute<S extends DescService = DescService> {
  service: S;
  impl: Partial<ServiceImpl<S>>;
}

function route<S extends DescService>(service: S, impl: Partial<ServiceImpl<S>>): ServiceRoute {
  return { service, impl } as unknown as ServiceRoute;
}

/**
 * The services the coordinator may call on this agent: the one place a
 * routed method is wired. A method a service leaves out answers
 * NOT_IMPLEMENTED.
 */
export function agentRoutes(deps: AgentServiceDeps): ServiceRoute[] {
  return [
    route(DeviceService, agentDeviceService(deps)),
    route(VideoService, agentVideoService(deps)),
    route(EvidenceService, agentEvidenceService(deps)),
    route(AgentControlService, agentControlService(deps)),
  ];
}
