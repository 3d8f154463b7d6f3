// Types only: the hot `farm devices` (hot/hot-devices.ts) prints with this module and must not load protobuf-es's schemas.
import type { Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { ago, table } from "../output.js";
import type { CommandContext } from "../tree/spec.js";

/** Physical ids are cut to this many characters in the table (a trailing … shows where); -o wide and json show them whole. */
const SHOWN_ID = 15;

/** A physical id as the table shows it: a unique prefix is enough wherever an id is taken (`--physical-id`, `--device`). */
function shortId(id: string, wide: boolean): string {
  return wide || id.length <= SHOWN_ID ? id : `${id.slice(0, SHOWN_ID)}…`;
}

/** A Timestamp in ms, as @bufbuild/protobuf/wkt's timestampMs computes it. */
const timestampMs = (t: { seconds: bigint; nanos: number }): number => Number(t.seconds) * 1000 + Math.round(t.nanos / 1000000);

/**
 * What `farm devices` prints for a listing: `{devices: [...]}` (each as
 * `json` makes it: protobuf-es's toJson, or the hot path's own writer) or
 * the table; -o wide adds manufacturer, ABI, boot id, pin label, last
 * update, quarantine reason and why a phone needs attention.
 */
export function printDevices(ctx: Pick<CommandContext, "printer">, devices: readonly Device[], json: (d: Device) => unknown): void {
  // Aliases of one phone (same physical id) are listed together.
  const grouped = [...devices].sort((a, b) => {
    const pa = a.properties?.physicalId || `~${a.serial}`;
    const pb = b.properties?.physicalId || `~${b.serial}`;
    return pa < pb ? -1 : pa > pb ? 1 : a.serial < b.serial ? -1 : 1;
  });
  const wide = ctx.printer.wide;
  ctx.printer.result({ devices: devices.map(json) }, () =>
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
}
