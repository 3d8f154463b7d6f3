import { intFlag, stringFlag, type Parsed } from "./args.js";

/** The adb server to use: flags > ANDROID_ADB_SERVER_PORT > a service config file's adbHost/adbPort > 127.0.0.1:5037. */
export function adbServerAddress(parsed: Parsed, env: NodeJS.ProcessEnv, file: { adbHost?: unknown; adbPort?: unknown } = {}): { host: string; port: number } {
  const host = stringFlag(parsed, "adb-host") ?? (typeof file.adbHost === "string" ? file.adbHost : "127.0.0.1");
  const flagPort = intFlag(parsed, "adb-port", 1, 65535);
  const envPort = Number(env["ANDROID_ADB_SERVER_PORT"]);
  const filePort = typeof file.adbPort === "number" && Number.isInteger(file.adbPort) && file.adbPort > 0 && file.adbPort < 65536 ? file.adbPort : undefined;
  const port = flagPort ?? (Number.isInteger(envPort) && envPort > 0 && envPort < 65536 ? envPort : (filePort ?? 5037));
  return { host, port };
}
