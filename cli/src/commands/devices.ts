import { toJson } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { allPages } from "@farm/client/all-pages";
import { serviceClient } from "@farm/client/transport";
import { ago, table } from "../output.js";
import { clientSession } from "../session.js";
import type { deviceListOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";

/** Physical ids are cut to this many characters in the table (a trailing … shows where); -o wide and json show them whole. */
const SHOWN_ID = 15;

/** A physical id as the table shows it: a unique prefix is enough wherever an id is taken (`--physical-id`, `--device`). */
function shortId(id: string, wide: boolean): string {
  return wide || id.length <= SHOWN_ID ? id : `${id.slice(0, SHOWN_ID)}…`;
}

/** `farm device list` / `farm devices`; -o wide adds manufacturer, ABI, boot id, pin label, last update, quarantine reason and why a phone needs attention. */
export const listDevices: Action<typeof deviceListOptions> = async (input) => {
  const session = clientSession(input);
  const client = serviceClient(RegistryService, session.config);
  const filter = { agent: input.opts.agent ?? "", state: input.opts.state ?? "" };
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
  const wide = input.ctx.printer.wide;
  input.ctx.printer.result({ devices: devices.map((d) => toJson(DeviceSchema, d, { alwaysEmitImplicit: true })) }, () =>
    table(
      ["PHYSICAL", "SERIAL", "STATE", "PLATFORM", "MODEL", "API", "ANDROID", "AGENT", "SERIALNO", ...(wide ? ["MANUFACTURER", "ABI", "BOOT ID", "PIN", "UPDATED", "QUARANTINE", "ATTENTION"] : [])],
      grouped.map((d, i) => {
        const id = d.properties?.physicalId ?? "";
        const sameAsAbove = i > 0 && id !== "" && grouped[i - 1]?.properties?.physicalId === id;
        const shown = id === "" ? "?" : sameAsAbove ? "  \"" : `${shortId(id, wide)}${d.properties?.identityStatus === "duplicate" ? " (duplicate!)" : ""}`;
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
          ...(wide
            ? [d.properties?.manufacturer ?? "", d.properties?.abi ?? "", d.properties?.bootId ?? "", d.properties?.pinLabel ?? "", ago(d.updateTime ? timestampMs(d.updateTime) : undefined), d.quarantineReason, d.attentionReason]
            : []),
        ];
      }),
    ));
  return 0;
};
