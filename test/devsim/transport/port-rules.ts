/**
 * The adb server scans 127.0.0.1:5555–5585 for emulators and adopts whatever
 * answers there as `emulator-<port-1>`; a simulator on such a port would show
 * up twice. Nothing of ours may listen there.
 */
export const EMULATOR_PORTS = { first: 5555, last: 5585 } as const;

/** The adb server's default port; a private server must never take it. */
export const DEFAULT_ADB_SERVER_PORT = 5037;

export function isEmulatorPort(port: number): boolean {
  return port >= EMULATOR_PORTS.first && port <= EMULATOR_PORTS.last;
}

/** Ports we must not use for simulated devices or private adb servers. */
export function isReservedPort(port: number): boolean {
  return isEmulatorPort(port) || port === DEFAULT_ADB_SERVER_PORT;
}
