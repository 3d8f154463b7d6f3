import type { ValueSource } from "./options/resolve.js";

/** The adb server to use: --adb-host/--adb-port (resolved: flag > ANDROID_ADB_SERVER_PORT > config file) > 127.0.0.1:5037. */
export function adbServerAddress(opts: { adbHost?: string | undefined; adbPort?: number | undefined }): { host: string; port: number } {
  return { host: opts.adbHost ?? "127.0.0.1", port: opts.adbPort ?? 5037 };
}

/** Where the adb port came from, as a start log names it: an operator whose agent sees no phones checks this first. */
export function adbPortSource(source: ValueSource | undefined): string {
  return source === "flag" ? "--adb-port" : source === "env" ? "ANDROID_ADB_SERVER_PORT" : source === "config" ? "config file (adbPort)" : "default (adb's 5037)";
}
