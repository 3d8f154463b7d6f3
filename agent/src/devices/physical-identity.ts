import { createHash } from "node:crypto";

/**
 * A phone's physical id: a hash of its hardware identity, independent of the
 * adb serial it is reached by (USB serial, ip:5555, mDNS name). An operator
 * pin, when set, is part of the identity, which is how two phones that
 * present the same identity (the "0000" serial case) are told apart.
 */
export function physicalIdOf(props: Record<string, string>, pinLabel = ""): string {
  const identity = [
    props["ro.serialno"] || props["ro.boot.serialno"] || "",
    props["ro.product.manufacturer"] ?? "",
    props["ro.product.model"] ?? "",
    props["ro.product.device"] ?? "",
    props["ro.product.name"] ?? "",
    pinLabel,
  ];
  return "pd-" + createHash("sha256").update(JSON.stringify(identity)).digest("hex").slice(0, 24);
}

/**
 * Groups serials by physical id and marks those whose members report
 * different boot ids at the same time: two phones, not one phone twice.
 */
export function findDuplicateIdentities(devices: { serial: string; physicalId: string; bootId: string }[]): Set<string> {
  const byId = new Map<string, Set<string>>();
  for (const d of devices) {
    if (!d.bootId) continue;
    const boots = byId.get(d.physicalId) ?? new Set<string>();
    boots.add(d.bootId);
    byId.set(d.physicalId, boots);
  }
  const duplicates = new Set<string>();
  for (const d of devices) if ((byId.get(d.physicalId)?.size ?? 0) > 1) duplicates.add(d.serial);
  return duplicates;
}
