import { toJson } from "@bufbuild/protobuf";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema, type Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { serviceClient } from "@farm/client/transport";
import { clientSession } from "../session.js";
import type { aliasOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm device alias accept|reject`: an admin's word on a serial a second agent claims. */
function decision(name: "accept" | "reject"): Action<typeof aliasOptions> {
  return async (input) => {
    const session = clientSession(input);
    const req = { serial: input.opts.device, agent: input.opts.agent };
    const client = serviceClient(RegistryService, session.config);
    const res = name === "accept" ? await client.acceptDeviceAlias(req, { timeoutMs: session.timeoutMs }) : await client.rejectDeviceAlias(req, { timeoutMs: session.timeoutMs });
    const d = res.device as Device;
    input.ctx.printer.result({ device: toJson(DeviceSchema, d, { alwaysEmitImplicit: true }) }, () => `${d.serial} on ${d.agentName}: ${d.state}${d.quarantineReason ? ` (${d.quarantineReason})` : ""}`);
    return 0;
  };
}

export const accept = decision("accept");
export const reject = decision("reject");
