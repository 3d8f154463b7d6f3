import type { SimDevice } from "../device/sim-device.js";

/** What the control API and CLI report about a device. */
export interface DeviceSummary {
  serials: string[];
  ports: number[];
  serialno: string;
  model: string;
  bootId: string;
  online: boolean;
  booting: boolean;
  screen: { on: boolean; locked: boolean; width: number; height: number; rotation: number; foreground: string };
  faults: Record<string, unknown>;
  /** Latency profile name (instant unless set). */
  latency: string;
}

export function summarize(device: SimDevice, host: string): DeviceSummary {
  const display = device.state.display;
  const size = display.logicalSize;
  return {
    serials: device.ports.map((port) => `${host}:${port}`),
    ports: device.ports,
    serialno: device.serialno,
    model: device.model,
    bootId: device.bootId,
    online: device.onlineConnections > 0,
    booting: device.isBooting,
    screen: { on: display.screenOn, locked: display.locked, width: size.width, height: size.height, rotation: display.rotation, foreground: device.state.screen.focusedPackage },
    faults: { ...device.faults.current },
    latency: device.state.latency.profile.name,
  };
}
