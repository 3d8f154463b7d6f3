import { parseArgs } from "node:util";
import { adbPortFromEnv } from "./host/devsim.js";
import { LATENCY_PROFILE_NAMES, type LatencyProfileName } from "./latency/latency-profiles.js";

export interface CliOptions {
  devices: number;
  adbPort: number;
  host: string;
  connect: boolean;
  format: "json" | "table";
  help: boolean;
  /** Scenario file (devices + fault schedule). */
  scenario?: string;
  /** Latency profile of every device. */
  latency?: LatencyProfileName;
}

export const USAGE = `Usage: npm run devsim -- [options]

Starts simulated Android devices that speak adbd's protocol on loopback
ports, connects them to an adb server with \`adb connect\`, prints one line
per device, and runs until SIGINT/SIGTERM (then disconnects them).

Options:
  --devices N       number of devices (default 1); each imitates a different phone
  --adb-port N      adb server port (default $ANDROID_ADB_SERVER_PORT or 5037);
                    when none runs there, one is started (\`adb start-server\`) before
                    any device connects; it keeps running after devsim stops
  --host ADDR       address to listen on (default 127.0.0.1)
  --no-connect      only listen; do not run \`adb connect\`
  --format F        json (one JSON object per line: serial, port, serialno, model, control)
                    or table (default: table on a terminal, json otherwise)
  --scenario FILE   devices and a fault schedule from a JSON scenario file
  --latency NAME    how long each phone takes per service: instant (default),
                    pixel-usb, emulator or wifi-adb (see README, Latency profiles)
  -h, --help        show this help

The control API (fault injection) starts with the devices; its URL is printed
on stderr as "devsim: control API at URL". Drive it with:

  npm run devsim -- status  [--control URL]
  npm run devsim -- fault   [--control URL] SERIAL key=value… | --clear
        e.g. fault 127.0.0.1:40001 storageFull=true latencyMs=200 png=truncated hangServices=sync:
  npm run devsim -- action  [--control URL] SERIAL vanish|restore|reboot|screen-off|screen-on|lock|unlock|authorize [downMs=N]

(--control defaults to $DEVSIM_CONTROL.)

Environment:
  ANDROID_ADB_SERVER_PORT   default adb server port
  ADB                       adb executable (default: adb on PATH)
  DEVSIM_DEBUG              1: log connections; packets: also trace every packet
  DEVSIM_CONTROL            control API URL for the status/fault/action subcommands`;

/** Parses argv (without node and script); throws with a message on bad input. */
export function parseCliOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env, isTty = false): CliOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      devices: { type: "string" },
      "adb-port": { type: "string" },
      host: { type: "string" },
      "no-connect": { type: "boolean" },
      format: { type: "string" },
      scenario: { type: "string" },
      latency: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  const devices = values.devices === undefined ? 1 : positiveInt("--devices", values.devices);
  const adbPort = values["adb-port"] === undefined ? adbPortFromEnv(env) : positiveInt("--adb-port", values["adb-port"]);
  if (adbPort > 65535) throw new Error("--adb-port must be at most 65535");
  const format = values.format ?? (isTty ? "table" : "json");
  if (format !== "json" && format !== "table") throw new Error(`--format must be json or table, not ${format}`);
  if (values.latency !== undefined && !LATENCY_PROFILE_NAMES.includes(values.latency as LatencyProfileName)) {
    throw new Error(`--latency must be one of ${LATENCY_PROFILE_NAMES.join(", ")}, not ${JSON.stringify(values.latency)}`);
  }
  return {
    devices,
    adbPort,
    host: values.host ?? "127.0.0.1",
    connect: !values["no-connect"],
    format,
    help: values.help ?? false,
    ...(values.scenario !== undefined ? { scenario: values.scenario } : {}),
    ...(values.latency !== undefined ? { latency: values.latency as LatencyProfileName } : {}),
  };
}

function positiveInt(name: string, text: string): number {
  if (!/^[0-9]+$/.test(text) || Number(text) < 1) throw new Error(`${name} needs a positive integer, not ${JSON.stringify(text)}`);
  return Number(text);
}
