import { LATENCY_PROFILE_NAMES, type LatencyProfileName } from "../latency/latency-profiles.js";
import type { SimDevice } from "../device/sim-device.js";

/** One-shot things that happen to a phone (as opposed to faults that stay on). */
export type DeviceAction =
  | { action: "vanish" }
  | { action: "restore" }
  | { action: "reboot"; downMs?: number }
  | { action: "screen-off" }
  | { action: "screen-on" }
  | { action: "lock" }
  | { action: "unlock" }
  | { action: "authorize" }
  | { action: "latency"; profile: LatencyProfileName };

export const ACTIONS = ["vanish", "restore", "reboot", "screen-off", "screen-on", "lock", "unlock", "authorize", "latency"] as const;

export function parseDeviceAction(input: unknown): DeviceAction {
  const value = input as { action?: unknown; downMs?: unknown; profile?: unknown } | null;
  if (typeof value !== "object" || value === null || !ACTIONS.includes(value.action as (typeof ACTIONS)[number])) {
    throw new TypeError(`action must be one of ${ACTIONS.join(", ")}`);
  }
  if (value.downMs !== undefined && (typeof value.downMs !== "number" || value.downMs < 0)) throw new TypeError("downMs must be a non-negative number");
  if (value.action === "latency" && !LATENCY_PROFILE_NAMES.includes(value.profile as LatencyProfileName)) throw new TypeError(`profile must be one of ${LATENCY_PROFILE_NAMES.join(", ")}`);
  return value as DeviceAction;
}

export async function applyDeviceAction(device: SimDevice, action: DeviceAction): Promise<void> {
  const display = device.state.display;
  switch (action.action) {
    case "vanish":
      return device.vanish();
    case "restore":
      return device.restore();
    case "reboot":
      return device.reboot(action.downMs);
    case "screen-off":
      display.screenOn = false;
      display.locked = true;
      break;
    case "screen-on":
      display.screenOn = true;
      break;
    case "lock":
      display.locked = true;
      break;
    case "unlock":
      display.locked = false;
      break;
    case "authorize":
      device.authorize();
      return;
    case "latency":
      device.state.latency.set(action.profile);
      device.rebootDownMs = device.state.latency.profile.rebootMs;
      return;
  }
  device.state.screen.changed();
}
