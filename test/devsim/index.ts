// Public API of the device simulator, for tests and tools.

export { SDK_ENDPOINT_FILE, SDK_ENDPOINT_SCHEMA, sdkSocketName } from "./device/app-sdk-server.js";
export { defaultProperties } from "./device/default-properties.js";
export { DEVICE_PROFILES, EMULATOR_PROFILE, type DeviceProfile } from "./device/device-profiles.js";
export { DeviceState, type DeviceHooks, type DisplaySpec } from "./device/device-state.js";
export { LogBuffer, type LogEntry } from "./device/log-buffer.js";
export { PackageManager, type InstalledPackage, type PackageManifest } from "./device/package-manager.js";
export { ProcessTable, parseSignal, type SimProcess } from "./device/process-table.js";
export { PropertyStore } from "./device/property-store.js";
export { SettingsStore, type SettingsNamespace } from "./device/settings-store.js";
export { buildSimApk, parseSimApk } from "./device/sim-apk.js";
export { SimDevice, IMPLEMENTED_FEATURES, randomSerialno, type SimDeviceOptions } from "./device/sim-device.js";
export { SocketNamespace, type SocketConnector } from "./device/socket-namespace.js";
export type { AuthMode } from "./transport/device-connection.js";

export { ROOT, SHELL, AID, appCaller, type Caller } from "./fs/caller.js";
export { FileSystem, resolvePath, type StatInfo, type DirEntry } from "./fs/file-system.js";
export { FsError, ERRNO } from "./fs/fs-error.js";

export { DEMO_PACKAGE } from "./screen/apps/demo-app.js";
export { Display } from "./screen/display.js";
export { damagePng } from "./screen/png-faults.js";
export { ScreenModel, type ActivityEntry } from "./screen/screen-model.js";
export { ScreenRenderer, type Frame } from "./screen/screen-renderer.js";
export type { AppModel, ScreenSpec, ItemSpec } from "./screen/screen-spec.js";
export type { UiNode, TapAction, Bounds } from "./screen/ui-node.js";
export { toUiautomatorXml } from "./screen/uiautomator-xml.js";

export { controlRequest, setFaults, clearFaults, runAction } from "./control/control-client.js";
export { startControlServer, type ControlServer } from "./control/control-server.js";
export { applyDeviceAction, parseDeviceAction, ACTIONS, type DeviceAction } from "./control/device-actions.js";
export type { DeviceSummary } from "./control/device-summary.js";
export { parseScenario, loadScenario, runSchedule, type Scenario, type ScheduledEvent } from "./control/scenario.js";
export { DeviceFaults } from "./faults/device-faults.js";
export { parseFaultSettings, FAULT_KEYS, type FaultSettings, type PngFault } from "./faults/fault-settings.js";

export { runAdb, adbBinary, type AdbResult, type RunAdbOptions } from "./host/adb-cli.js";
export { adbConnect, adbDisconnect, type AdbConnectOptions } from "./host/adb-connect.js";
export { ensureAdbServer, startAdbServer, type AdbServer, type StartAdbServerOptions } from "./host/adb-server.js";
export { waitForDeviceState, type WantedState, type WaitForDeviceOptions } from "./host/device-watch.js";
export { startDevsim, adbPortFromEnv, type Devsim, type DevsimDevice, type DevsimDeviceSpec, type DevsimOptions } from "./host/devsim.js";
export { findFreePort } from "./host/free-port.js";
export { hostRequest, trackDevices, parseDeviceList, AdbServerError, type DeviceList, type DeviceTracker } from "./host/host-client.js";
export { waitUntil } from "./host/wait-until.js";

export type { ShellCommand, CommandContext, CommandTable, RunOverrides } from "./shell/command.js";
export { DEFAULT_COMMANDS } from "./shell/commands/index.js";
export { Shell, type ShellOptions } from "./shell/shell.js";

export { defaultServices } from "./services/default-services.js";
export { ServiceRegistry } from "./services/service-registry.js";
export type { Service, ServiceRequest, ServiceRunner, ServiceDevice } from "./services/service.js";
export type { ServiceStream } from "./transport/adb-stream.js";
export { isEmulatorPort, isReservedPort, EMULATOR_PORTS, DEFAULT_ADB_SERVER_PORT } from "./transport/port-rules.js";
