import { ScalarType } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { DevicePropertiesSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import type { DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";

/** Devices one agent may report; a host with more phones runs more agents. */
export const MAX_DEVICES_PER_AGENT = 1024;
/** Characters in any one reported string (serial, state, each property). */
export const MAX_FIELD_CHARS = 256;
/** Entries in any one reported list (unresolved action ids). */
export const MAX_LIST_ENTRIES = 1024;

const stringFields = DevicePropertiesSchema.fields.filter((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.STRING);
const stringLists = DevicePropertiesSchema.fields.filter((f) => f.fieldKind === "list" && f.listKind === "scalar" && f.scalar === ScalarType.STRING);

/**
 * Refuses an inventory an agent may not send: more than 1024 devices, or
 * any string or list past its cap (every string property is checked, so a
 * field added later is bounded too). The error names the offending field.
 */
export function checkInventory(reports: readonly DeviceReport[]): void {
  if (reports.length > MAX_DEVICES_PER_AGENT) {
    throw farmError(Errors.INVENTORY_TOO_LARGE, `the inventory lists ${reports.length} devices; an agent may report at most ${MAX_DEVICES_PER_AGENT}`, "devices");
  }
  reports.forEach((r, i) => checkReport(r, `devices[${i}]`));
}

/** One device report's bounds (also for a single device change). */
export function checkReport(r: DeviceReport, at = "device"): void {
  if (r.serial === "") throw invalidArgument(`${at}.serial`, "a device report needs its adb serial");
  bounded(r.serial, `${at}.serial`);
  bounded(r.state, `${at}.state`);
  const props = r.properties as unknown as Record<string, unknown> | undefined;
  if (!props) return;
  for (const f of stringFields) bounded(props[f.localName] as string, `${at}.properties.${f.name}`);
  for (const f of stringLists) {
    const list = props[f.localName] as string[];
    if (list.length > MAX_LIST_ENTRIES) {
      throw farmError(Errors.INVENTORY_TOO_LARGE, `${at}.properties.${f.name} has ${list.length} entries; at most ${MAX_LIST_ENTRIES}`, `${at}.properties.${f.name}`);
    }
    list.forEach((v, j) => bounded(v, `${at}.properties.${f.name}[${j}]`));
  }
}

function bounded(value: string, field: string): void {
  if (value.length <= MAX_FIELD_CHARS) return;
  throw farmError(Errors.INVENTORY_TOO_LARGE, `${field} is ${value.length} characters long; at most ${MAX_FIELD_CHARS}`, field);
}
