import { intFlag, stringFlag, type Parsed } from "./args.js";

/** The adb server to use: flags > ANDROID_ADB_SERVER_PORT > 127.0.0.1:5037. */
export function adbServerAddress(parsed: Parsed, env: NodeJS.ProcessEnv): { host: string; port: number } {
  const host = stringFlag(parsed, "adb-host") ?? "127.0.0.1";
  const flagPort = intFlag(parsed, "adb-port", 1, 65535);
  const envPort = Number(env["ANDROID_ADB_SERVER_PORT"]);
  const port = flagPort ?? (Number.isInteger(envPort) && envPort > 0 && envPort < 65536 ? envPort : 5037);
  return { host, port };
}
