import { readFile } from "node:fs/promises";
import { DEVICE_PROFILES, EMULATOR_PROFILE, type DeviceProfile } from "../device/device-profiles.js";
import type { SimDevice } from "../device/sim-device.js";
import { parseFaultSettings, type FaultSettings } from "../faults/fault-settings.js";
import type { DevsimDeviceSpec } from "../host/devsim.js";
import { applyDeviceAction, parseDeviceAction, type DeviceAction } from "./device-actions.js";

/**
 * A reproducible setup: devices plus faults over time. JSON shape:
 *
 * {
 *   "devices": [ { "serialno": "0000", "profile": "Pixel 7", "serials": 2, "props": {…},
 *                  "auth": "none|deny|accept", "rebootDownMs": 1000, "faults": {…} } ],
 *   "schedule": [ { "at": 5000, "device": 0, "faults": { "latencyMs": 200 } },
 *                 { "at": 8000, "device": 1, "action": "reboot", "downMs": 2000 } ]
 * }
 *
 * "devices" may also be a count; "at" is ms after start; "device" is an index.
 */
export interface Scenario {
  devices: DevsimDeviceSpec[];
  initialFaults: Array<FaultSettings | undefined>;
  schedule: ScheduledEvent[];
}

export type ScheduledEvent = { at: number; device: number } & ({ faults: Record<string, unknown> } | DeviceAction);

function profileFrom(value: unknown, where: string): DeviceProfile | number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "number" && Number.isInteger(value) && value >= 0) return value;
  if (typeof value === "string") {
    if (value === "emulator") return EMULATOR_PROFILE;
    const found = DEVICE_PROFILES.find((p) => p.model === value || p.device === value);
    if (found) return found;
  }
  throw new TypeError(`${where}.profile: unknown profile ${JSON.stringify(value)}; use an index, "emulator" or one of ${DEVICE_PROFILES.map((p) => p.model).join(", ")}`);
}

/** Validates a parsed scenario; errors name the offending field. */
export function parseScenario(input: unknown): Scenario {
  if (typeof input !== "object" || input === null) throw new TypeError("scenario must be a JSON object");
  const raw = input as { devices?: unknown; schedule?: unknown };
  const list: unknown[] = typeof raw.devices === "number" ? Array.from({ length: raw.devices }, () => ({})) : Array.isArray(raw.devices) ? raw.devices : [];
  if (list.length === 0) throw new TypeError("scenario.devices must be a positive count or a non-empty array");
  const devices: DevsimDeviceSpec[] = [];
  const initialFaults: Array<FaultSettings | undefined> = [];
  list.forEach((item, index) => {
    const where = `devices[${index}]`;
    if (typeof item !== "object" || item === null) throw new TypeError(`${where} must be an object`);
    const d = item as Record<string, unknown>;
    const spec: DevsimDeviceSpec = {};
    const profile = profileFrom(d["profile"], where);
    spec.profile = profile ?? index;
    if (d["serialno"] !== undefined) spec.serialno = String(d["serialno"]);
    if (d["serials"] !== undefined) spec.serials = Number(d["serials"]);
    if (d["props"] !== undefined) spec.props = d["props"] as Record<string, string>;
    if (d["auth"] !== undefined) {
      if (!["none", "deny", "accept"].includes(String(d["auth"]))) throw new TypeError(`${where}.auth must be none, deny or accept`);
      spec.auth = d["auth"] as "none";
    }
    if (d["rebootDownMs"] !== undefined) spec.rebootDownMs = Number(d["rebootDownMs"]);
    devices.push(spec);
    try {
      initialFaults.push(d["faults"] === undefined ? undefined : (parseFaultSettings(d["faults"]) as FaultSettings));
    } catch (error) {
      throw new TypeError(`${where}.faults: ${(error as Error).message}`);
    }
  });
  const schedule: ScheduledEvent[] = (Array.isArray(raw.schedule) ? raw.schedule : []).map((item: unknown, index: number) => {
    const where = `schedule[${index}]`;
    const e = item as Record<string, unknown>;
    if (typeof e !== "object" || e === null) throw new TypeError(`${where} must be an object`);
    const at = Number(e["at"]);
    const device = Number(e["device"] ?? 0);
    if (!(at >= 0)) throw new TypeError(`${where}.at must be ms >= 0`);
    if (!Number.isInteger(device) || device < 0 || device >= devices.length) throw new TypeError(`${where}.device must index devices (0..${devices.length - 1})`);
    try {
      if (e["faults"] !== undefined) return { at, device, faults: parseFaultSettings(e["faults"]) as Record<string, unknown> };
      return { at, device, ...parseDeviceAction(e) };
    } catch (error) {
      throw new TypeError(`${where}: ${(error as Error).message}`);
    }
  });
  return { devices, initialFaults, schedule };
}

export async function loadScenario(file: string): Promise<Scenario> {
  const text = await readFile(file, "utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${file}: not valid JSON: ${(error as Error).message}`);
  }
  try {
    return parseScenario(json);
  } catch (error) {
    throw new Error(`${file}: ${(error as Error).message}`);
  }
}

/** Starts the schedule's timers against the started devices; returns a canceller. */
export function runSchedule(schedule: readonly ScheduledEvent[], devices: readonly SimDevice[], log: (message: string) => void = () => {}): () => void {
  const timers = schedule.map((event) =>
    setTimeout(() => {
      const device = devices[event.device]!;
      if ("faults" in event) {
        device.faults.set(event.faults as Parameters<typeof device.faults.set>[0]);
        log(`t+${event.at}ms device ${event.device}: faults ${JSON.stringify(event.faults)}`);
      } else {
        void applyDeviceAction(device, event);
        log(`t+${event.at}ms device ${event.device}: ${event.action}`);
      }
    }, event.at)
  );
  return () => timers.forEach(clearTimeout);
}
