// Types only: the hot `farm devices` writes a device's JSON without loading protobuf-es's schemas.
import type { Device } from "./gen/farm/v1/registry_pb.js";

/** The range of Timestamp's JSON form (RFC 3339, years 0001..9999), as protobuf-es checks it. */
const MS_MIN = Date.parse("0001-01-01T00:00:00Z");
const MS_MAX = Date.parse("9999-12-31T23:59:59Z");

/**
 * A Device as `toJson(DeviceSchema, d, { alwaysEmitImplicit: true })` writes
 * it (field order, JSON names, an update time in RFC 3339 with 0, 3, 6 or 9
 * fractional digits), for the hot `farm devices` (hot-device-json.test.ts
 * compares the two on random devices). Undefined where toJson would refuse
 * (a time it cannot write): the caller then takes protobuf-es's own path.
 */
export function hotDeviceJson(d: Device): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = { serial: d.serial, agentId: d.agentId, agentName: d.agentName, state: d.state };
  const p = d.properties;
  if (p) {
    out["properties"] = {
      model: p.model,
      manufacturer: p.manufacturer,
      apiLevel: p.apiLevel,
      androidVersion: p.androidVersion,
      abi: p.abi,
      serialno: p.serialno,
      bootId: p.bootId,
      physicalId: p.physicalId,
      identityStatus: p.identityStatus,
      pinLabel: p.pinLabel,
      platform: p.platform,
      unresolvedActionIds: [...p.unresolvedActionIds],
    };
  }
  if (d.updateTime) {
    const t = timestampJson(d.updateTime.seconds, d.updateTime.nanos);
    if (t === undefined) return undefined;
    out["updateTime"] = t;
  }
  out["quarantineReason"] = d.quarantineReason;
  out["attentionReason"] = d.attentionReason;
  return out;
}

function timestampJson(seconds: bigint, nanos: number): string | undefined {
  const ms = Number(seconds) * 1000;
  if (ms < MS_MIN || ms > MS_MAX || nanos < 0 || nanos > 999_999_999) return undefined;
  let z = "Z";
  if (nanos > 0) {
    const digits = (nanos + 1_000_000_000).toString().substring(1);
    z = digits.substring(3) === "000000" ? `.${digits.substring(0, 3)}Z` : digits.substring(6) === "000" ? `.${digits.substring(0, 6)}Z` : `.${digits}Z`;
  }
  return new Date(ms).toISOString().replace(".000Z", z);
}
