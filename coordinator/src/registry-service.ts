import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import {
  RegistryService,
  ListAgentsResponseSchema,
  ListDevicesResponseSchema,
} from "@farm/shared/gen/farm/v1/registry_service_pb";
import type { Registry } from "./registry.js";
import { isBinaryRequest, withPreEncodedField } from "@farm/shared/pre-encoded";

export function registerRegistryService(router: ConnectRouter, deps: { registry: Registry }): void {
  router.service(RegistryService, {
    listAgents() {
      return create(ListAgentsResponseSchema, { agents: deps.registry.listAgents() });
    },
    listDevices(req, ctx) {
      const filter = { ...(req.agent ? { agent: req.agent } : {}), ...(req.state ? { state: req.state } : {}) };
      if (isBinaryRequest(ctx.requestHeader.get("content-type"))) {
        const t0 = performance.now();
        const encoded = deps.registry.listDevicesEncoded(filter);
        ctx.responseHeader.set("server-timing", `registry;dur=${(performance.now() - t0).toFixed(2)}`);
        return withPreEncodedField(ListDevicesResponseSchema, ListDevicesResponseSchema.field.devices.number, encoded);
      }
      return create(ListDevicesResponseSchema, { devices: deps.registry.listDevices(filter) });
    },
  });
}
