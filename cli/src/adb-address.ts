/** The adb server to use: --adb-host/--adb-port (resolved: flag > ANDROID_ADB_SERVER_PORT > config file) > 127.0.0.1:5037. */
export function adbServerAddress(opts: { adbHost?: string | undefined; adbPort?: number | undefined }): { host: string; port: number } {
  return { host: opts.adbHost ?? "127.0.0.1", port: opts.adbPort ?? 5037 };
}
