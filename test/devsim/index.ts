// Public API of the device simulator, for tests and tools.

export { SimDevice, IMPLEMENTED_FEATURES, randomSerialno, type SimDeviceOptions } from './device/sim-device.js';
export { DeviceState } from './device/device-state.js';
export { PropertyStore } from './device/property-store.js';
export { DEVICE_PROFILES, type DeviceProfile } from './device/device-profiles.js';
export { defaultProperties } from './device/default-properties.js';

export { startAdbServer, type AdbServer, type StartAdbServerOptions } from './host/adb-server.js';
export { adbConnect, adbDisconnect, type AdbConnectOptions } from './host/adb-connect.js';
export { runAdb, adbBinary, type AdbResult, type RunAdbOptions } from './host/adb-cli.js';
export { waitForDeviceState, type WantedState, type WaitForDeviceOptions } from './host/device-watch.js';
export { hostRequest, trackDevices, parseDeviceList, AdbServerError, type DeviceList, type DeviceTracker } from './host/host-client.js';
export { findFreePort } from './host/free-port.js';
export { startDevsim, adbPortFromEnv, type Devsim, type DevsimDevice, type DevsimOptions } from './host/devsim.js';

export { Shell, type ShellOptions } from './shell/shell.js';
export type { ShellCommand, CommandContext, CommandTable } from './shell/command.js';
export { DEFAULT_COMMANDS } from './shell/commands/index.js';

export type { Service, ServiceRequest, ServiceRunner, ServiceDevice } from './services/service.js';
export { ServiceRegistry } from './services/service-registry.js';
export { defaultServices } from './services/default-services.js';
export type { ServiceStream } from './transport/adb-stream.js';
export { isEmulatorPort, isReservedPort, EMULATOR_PORTS, DEFAULT_ADB_SERVER_PORT } from './transport/port-rules.js';
