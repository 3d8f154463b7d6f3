import { CliError } from "../cli-error.js";
import { Errors } from "@farm/shared/error-codes";
import { clientOptions, leasedDeviceOptions } from "../options/common-options.js";
import { flag, intIn, parsed, parsedWithDefault, text } from "../options/index.js";
import { group, leaf } from "./spec.js";

/** `farm adb …`: a leased phone elsewhere in the user's own `adb devices`, through a local adbd endpoint. */

/** A local port for the endpoint; adb's own ports would make the adb server attach it twice. */
function endpointPort(value: string, flag: string): number {
  const port = intIn(0, 65_535)(value, flag);
  if (port === 5037 || (port >= 5554 && port <= 5585)) {
    throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} ${port} is one the adb server uses itself (5037, 5554-5585); pick another, or 0 for any free one`, flag);
  }
  return port;
}

export const adbServerPortOption = {
  adbPort: { ...parsed("--adb-port <port>", "Your adb server's port (adb -P)", intIn(1, 65_535), { env: "ANDROID_ADB_SERVER_PORT" }), defaultText: "5037" },
};

export const adbConnectOptions = {
  ...clientOptions,
  ...leasedDeviceOptions,
  port: { ...parsedWithDefault("--port <port>", "Local port of the endpoint on 127.0.0.1", endpointPort, 0), defaultText: "0: any free port" },
  ...adbServerPortOption,
  foreground: flag("--foreground", "Serve in this process until the tunnel closes or Ctrl-C, instead of in a background process"),
};
export const adbConnect = leaf({
  name: "connect",
  summary: "Put a leased phone in your own `adb devices` as 127.0.0.1:PORT (for adb, Android Studio, gradle, Appium)",
  description: "Opens a remote adb tunnel to the phone (--device, else the lease's phone), serves adb's device protocol on 127.0.0.1:PORT and runs " +
    "`adb connect 127.0.0.1:PORT` against your adb server. Prints the local serial once adb lists it, then keeps serving from a background " +
    "process ($FARM_HOME/adb-tunnels/ holds its state and log) until `farm adb disconnect` or until the farm closes the tunnel: the lease " +
    "ends, the token is revoked, the agent goes away or an admin closes it. Then the phone leaves `adb devices` and the reason is logged " +
    "(printed, with --foreground, which also exits 1). First, the serials of this machine's tunnels whose serving process died " +
    "(killed before it cleaned up) are disconnected from the adb server they were in, and listed (staleDisconnected).",
  options: adbConnectOptions,
  examples: ["farm adb connect --lease TOKEN", "farm adb connect --device SERIAL --port 40123", "farm lease run --device SERIAL -- farm adb connect --foreground", "adb -s 127.0.0.1:PORT shell"],
  load: async () => (await import("../commands/adb-connect.js")).connect,
});

export const adbServeOptions = {
  ...clientOptions,
  ...leasedDeviceOptions,
  port: parsedWithDefault("--port <port>", "Local port of the endpoint on 127.0.0.1", endpointPort, 0),
  ...adbServerPortOption,
  logFile: text("--log-file <file>", "Where this process logs (recorded in its state file)"),
};
/** The background process of `farm adb connect`: reports to its parent over IPC, then serves. */
export const adbServe = leaf({
  name: "serve",
  summary: "Serve one tunnel in the background (started by farm adb connect)",
  hidden: true,
  options: adbServeOptions,
  load: async () => (await import("../commands/adb-connect.js")).serve,
});

export const adbDisconnectOptions = {
  ...clientOptions,
  device: text("--device <serial>", "The local serial farm adb connect printed (127.0.0.1:PORT), or the phone's serial"),
  tunnel: text("--tunnel <id>", "Close this tunnel at the coordinator: yours, or anyone's for an admin"),
  all: flag("--all", "Every tunnel served from this machine"),
};
export const adbDisconnect = leaf({
  name: "disconnect",
  summary: "Close remote adb tunnels: one by local serial, by tunnel id, or --all of this machine's",
  options: adbDisconnectOptions,
  examples: ["farm adb disconnect --device 127.0.0.1:40123", "farm adb disconnect --all", "farm adb disconnect --tunnel 7f0c…"],
  load: async () => (await import("../commands/adb-disconnect.js")).disconnect,
});

export const adbListOptions = clientOptions;
export const adbList = leaf({
  name: "list",
  summary: "Open remote adb tunnels (yours; an admin's: everyone's), with the local serial of those served from this machine",
  description: "Lists the coordinator's open tunnels (yours; an admin's: everyone's), each with its local serial when this machine serves it, and the " +
    "tunnels served here that the coordinator no longer lists (localOnly). First, the serials of this machine's tunnels whose serving " +
    "process died are disconnected from the adb server they were in, and listed (staleDisconnected): left there, `127.0.0.1:PORT " +
    "offline` would be reconnected to whoever binds that port next.",
  options: adbListOptions,
  load: async () => (await import("../commands/adb-list.js")).list,
});

export const adbGroup = group({
  name: "adb",
  summary: "Remote adb: a leased phone in your own adb devices (connect, disconnect, list)",
  commands: [adbConnect, adbDisconnect, adbList, adbServe],
});
