import { toJson } from "@bufbuild/protobuf";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { allPages } from "../all-pages.js";
import { parseFlags, stringFlag } from "../args.js";
import { serviceClient } from "../client.js";
import { clientOptions, type Command } from "../command.js";
import { table } from "../output.js";
import { clientSession } from "../session.js";

export const devicesCommand: Command = {
  name: "devices",
  summary: "List devices on every agent",
  usage: "farm devices [--agent NAME_OR_ID] [--state STATE] [--output json|pretty]",
  options: { ...clientOptions, agent: { type: "string" }, state: { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const session = clientSession(ctx, parsed);
    const client = serviceClient(RegistryService, session.config);
    const filter = { agent: stringFlag(parsed, "agent") ?? "", state: stringFlag(parsed, "state") ?? "" };
    // Every page: the coordinator sends at most 1000 devices a call.
    const devices = await allPages(async (page) => {
      const res = await client.listDevices({ ...filter, ...page }, { timeoutMs: session.timeoutMs });
      return { items: res.devices, nextPageToken: res.nextPageToken };
    });
    // Aliases of one phone (same physical id) are listed together.
    const grouped = [...devices].sort((a, b) => {
      const pa = a.properties?.physicalId || `~${a.serial}`;
      const pb = b.properties?.physicalId || `~${b.serial}`;
      return pa < pb ? -1 : pa > pb ? 1 : a.serial < b.serial ? -1 : 1;
    });
    ctx.printer.result({ devices: devices.map((d) => toJson(DeviceSchema, d, { alwaysEmitImplicit: true })) }, () =>
      table(
        ["PHYSICAL", "SERIAL", "STATE", "PLATFORM", "MODEL", "API", "ANDROID", "AGENT", "SERIALNO"],
        grouped.map((d, i) => {
          const id = d.properties?.physicalId ?? "";
          const sameAsAbove = i > 0 && id !== "" && grouped[i - 1]?.properties?.physicalId === id;
          const shown = id === "" ? "?" : sameAsAbove ? "  \"" : `${id.slice(0, 15)}${d.properties?.identityStatus === "duplicate" ? " (duplicate!)" : ""}`;
          return [
            shown,
            d.serial,
            d.state,
            d.properties?.platform || "android",
            d.properties?.model ?? "",
            d.properties?.apiLevel ? String(d.properties.apiLevel) : "",
            d.properties?.androidVersion ?? "",
            d.agentName,
            d.properties?.serialno ?? "",
          ];
        }),
      ),
    );
    return 0;
  },
};
