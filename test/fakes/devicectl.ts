#!/usr/bin/env node
/**
 * A stand-in for Apple's `devicectl` (Xcode 15+), for hosts without it: the
 * same command line and JSON output for the two commands farm uses, over a
 * state file (FARM_FAKE_DEVICECTL_STATE) that tests write:
 *
 *   { "devices": [ { "identifier", "udid", "name", "marketingName", "osVersion",
 *       "paired", "tunnelState", "tunnelIPAddress", "developerMode", "ddi",
 *       "containers": { "<bundle id>": "<host dir standing in for its data container>" } } ] }
 *
 *   devicectl list devices --json-output FILE
 *   devicectl device copy from --device ID --domain-type appDataContainer
 *       --domain-identifier BUNDLE --source PATH --destination PATH --json-output FILE
 */
import { copyFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, normalize } from "node:path";

interface FakeDevice {
  identifier: string;
  udid: string;
  name: string;
  marketingName: string;
  osVersion: string;
  paired: boolean;
  tunnelState: string;
  tunnelIPAddress: string;
  developerMode: boolean;
  ddi: boolean;
  containers: Record<string, string>;
}

const args = process.argv.slice(2);
const flag = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const jsonOut = flag("--json-output");
const info = { arguments: ["devicectl", ...args], commandType: args.slice(0, 3).join("."), environment: { platform: "macOS" }, jsonVersion: 2, version: "397.21" };

function finish(result: unknown): never {
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ info: { ...info, outcome: "success" }, result }, null, 2));
  process.exit(0);
}

function fail(code: number, message: string): never {
  // devicectl prints the error and records it in the JSON output.
  process.stderr.write(`ERROR: ${message} (com.apple.dt.CoreDeviceError error ${code}.)\n`);
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ info: { ...info, outcome: "failed" }, error: { code, domain: "com.apple.dt.CoreDeviceError", userInfo: { NSLocalizedDescription: { string: message } } } }, null, 2));
  process.exit(1);
}

const statePath = process.env["FARM_FAKE_DEVICECTL_STATE"];
const state = statePath && existsSync(statePath) ? (JSON.parse(readFileSync(statePath, "utf8")) as { devices: FakeDevice[] }) : { devices: [] };

if (args[0] === "list" && args[1] === "devices") {
  finish({
    devices: state.devices.map((d) => ({
      identifier: d.identifier,
      capabilities: [],
      visibilityClass: "default",
      connectionProperties: {
        authenticationType: "manualPairing",
        isMobileDeviceOnly: false,
        pairingState: d.paired ? "paired" : "unpaired",
        transportType: "wired",
        tunnelState: d.tunnelState,
        tunnelIPAddress: d.tunnelIPAddress,
      },
      deviceProperties: { name: d.name, osVersionNumber: d.osVersion, developerModeStatus: d.developerMode ? "enabled" : "disabled", ddiServicesAvailable: d.ddi },
      hardwareProperties: { udid: d.udid, marketingName: d.marketingName, platform: "iOS", productType: "iPhone15,4", deviceType: "iPhone" },
    })),
  });
}

if (args[0] === "device" && args[1] === "copy" && args[2] === "from") {
  const id = flag("--device");
  const device = state.devices.find((d) => d.identifier === id || d.udid === id);
  if (!device) fail(1000, `The specified device was not found: ${id}`);
  if (flag("--domain-type") !== "appDataContainer") fail(1001, `Unsupported domain type: ${flag("--domain-type")}`);
  const bundle = flag("--domain-identifier") ?? "";
  const container = device.containers[bundle];
  if (!container) fail(10002, `Failed to find the app data container for ${bundle}`);
  const source = flag("--source") ?? "";
  const from = normalize(join(container, source));
  if (!from.startsWith(normalize(container)) || !existsSync(from)) fail(10003, `The file ${source} does not exist in the container`);
  copyFileSync(from, flag("--destination") ?? "");
  finish({ files: [{ source, destination: flag("--destination") }] });
}

fail(1, `unsupported command: ${args.join(" ")}`);
