import { toJson } from "@bufbuild/protobuf";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema, type Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { parseFlags, requiredString, type OptionSpec } from "../args.js";
import { serviceClient } from "../client.js";
import { clientOptions, type Command, type CommandGroup } from "../command.js";
import { clientSession } from "../session.js";

const options: OptionSpec = { ...clientOptions, device: { type: "string" }, agent: { type: "string" } };

function decision(name: "accept" | "reject"): Command {
  return {
    name,
    summary:
      name === "accept"
        ? "Let an agent use a quarantined serial: one phone legitimately on two hosts (admin)"
        : "Keep an agent's quarantined serial out of leases and routing for good (admin)",
    usage: `farm device alias ${name} --device SERIAL --agent NAME`,
    options,
    async run(ctx) {
      const parsed = parseFlags(ctx.args, this.options);
      const session = clientSession(ctx, parsed);
      const req = { serial: requiredString(parsed, "device"), agent: requiredString(parsed, "agent") };
      const client = serviceClient(RegistryService, session.config);
      const res = name === "accept" ? await client.acceptDeviceAlias(req, { timeoutMs: session.timeoutMs }) : await client.rejectDeviceAlias(req, { timeoutMs: session.timeoutMs });
      const d = res.device as Device;
      ctx.printer.result({ device: toJson(DeviceSchema, d, { alwaysEmitImplicit: true }) }, () =>
        `${d.serial} on ${d.agentName}: ${d.state}${d.quarantineReason ? ` (${d.quarantineReason})` : ""}`,
      );
      return 0;
    },
  };
}

/** `farm device alias accept|reject`: an admin's word on a serial a second agent claims. */
export const aliasGroup: CommandGroup = {
  name: "alias",
  summary: "Accept or reject a second agent's claim on a phone (quarantined serials)",
  commands: [decision("accept"), decision("reject")],
};
