import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import {
  RegistryService,
  ListAgentsResponseSchema,
  ListDevicesResponseSchema,
} from "@farm/shared/gen/farm/v1/registry_service_pb";
import type { Registry } from "./registry.js";

export function registerRegistryService(router: ConnectRouter, deps: { registry: Registry }): void {
  router.service(RegistryService, {
    listAgents() {
      return create(ListAgentsResponseSchema, { agents: deps.registry.listAgents() });
    },
    listDevices(req) {
      const filter = { ...(req.agent ? { agent: req.agent } : {}), ...(req.state ? { state: req.state } : {}) };
      return create(ListDevicesResponseSchema, { devices: deps.registry.listDevices(filter) });
    },
  });
}
