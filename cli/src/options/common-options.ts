import { flag, parsedWithDefault, text } from "./option-decl.js";
import { intIn } from "./parsers.js";

/** Where and as whom every client command talks (resolved by options/resolve.ts). */
export const connectionOptions = {
  coordinator: { ...text("--coordinator <url>", "Coordinator URL", { env: "FARM_COORDINATOR", config: "coordinator" }), defaultText: "the local farm standalone, else http://127.0.0.1:7420" },
  tokenFile: text("--token-file <file>", "File holding your token (FARM_TOKEN holds the token itself; the config file's token or tokenFile; else the local standalone's admin token)"),
  caFile: text("--ca-file <pem>", "PEM CA bundle to verify the coordinator's certificate with, instead of the system roots", { env: "FARM_CA_FILE", config: "caFile" }),
  insecure: flag("--insecure", "Send the token over cleartext http:// to a non-loopback coordinator anyway", { env: "FARM_INSECURE", config: "insecure" }),
  verbose: flag("--verbose", "Print each call's request id and elapsed time on stderr"),
};

/** Connection options plus the per-call deadline. */
export const clientOptions = {
  ...connectionOptions,
  timeout: parsedWithDefault("--timeout <ms>", "Deadline of each call, in milliseconds", intIn(100, 3_600_000), 30_000),
};

/** A device by serial (and agent), and the lease presented for it. */
export const leasedDeviceOptions = {
  device: text("--device <serial>", "Device serial, or a physical id (a unique prefix is enough, as farm devices shows it)", { env: "FARM_DEVICE" }),
  agent: text("--agent <name>", "Agent name or id, for a serial on two hosts"),
  lease: text("--lease <token>", "Lease token (farm lease acquire)", { env: "FARM_LEASE" }),
};

/** The device a command acts on, and the lease it presents. */
export const deviceOptions = {
  ...clientOptions,
  ...leasedDeviceOptions,
  requestId: text("--request-id <id>", "Idempotency key: a retry with the same id is answered, not run again"),
  capture: text("--capture <tokens>", "In a session (FARM_SESSION): more evidence for this action, e.g. screenshot.before,deviceLog,elements.after"),
  logPackage: text("--log-package <pkg>", "With deviceLog: keep only this app's lines (by its pid)"),
  logFilter: text("--log-filter <spec>", "With deviceLog: a logcat filterspec (\"*:W ActivityManager:I\")"),
};
