import { toJson } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/errors";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema, type Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { allPages } from "@farm/client/all-pages";
import { CliError } from "../cli-error.js";
import { serviceClient } from "@farm/client/transport";
import { clientSession } from "../session.js";
import type { deviceShowOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm device show SERIAL`: the registry's record of one serial (on each agent that has it, unless --agent). */
export const showDevice: Action<typeof deviceShowOptions> = async (input) => {
  const [serial] = input.args as [string];
  const session = clientSession(input);
  const client = serviceClient(RegistryService, session.config);
  const all = await allPages(async (page) => {
    const res = await client.listDevices({ agent: input.opts.agent ?? "", ...page }, { timeoutMs: session.timeoutMs });
    return { items: res.devices, nextPageToken: res.nextPageToken };
  });
  const found: Device[] = all.filter((d) => d.serial === serial);
  if (found.length === 0) throw new CliError(Errors.DEVICE_NOT_FOUND, `no device ${serial}${input.opts.agent ? ` on agent ${input.opts.agent}` : ""}`, "serial");
  const json = found.map((d) => toJson(DeviceSchema, d, { alwaysEmitImplicit: true }));
  input.ctx.printer.result({ devices: json }, () =>
    found
      .map((d) =>
        [
          `${d.serial} on ${d.agentName}: ${d.state}${d.quarantineReason ? ` (${d.quarantineReason})` : ""}`,
          ...Object.entries(toJson(DeviceSchema, d, { alwaysEmitImplicit: true }) as Record<string, unknown>)
            .filter(([k]) => k !== "serial")
            .map(([k, v]) => `  ${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`),
        ].join("\n")
      )
      .join("\n\n"));
  return 0;
};
