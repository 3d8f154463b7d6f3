import { execFile } from "node:child_process";

/** The adb executable: $ADB if set, else `adb` from PATH. */
export function adbBinary(): string {
  return process.env["ADB"] || "adb";
}

export interface AdbResult {
  /** Exit status (for `adb shell` with shell_v2: the remote command's). */
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunAdbOptions {
  /** Kill the CLI after this long (default 15 s). */
  timeoutMs?: number;
  /** Bytes to feed to stdin (otherwise stdin is closed at once). */
  input?: string | Buffer;
  env?: NodeJS.ProcessEnv;
}

/** Runs the real adb CLI against the server on adbPort; never throws for a non-zero exit. */
export function runAdb(adbPort: number, args: readonly string[], options: RunAdbOptions = {}): Promise<AdbResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      adbBinary(),
      ["-P", String(adbPort), ...args],
      {
        timeout: options.timeoutMs ?? 15_000,
        killSignal: "SIGKILL",
        maxBuffer: 64 * 1024 * 1024,
        env: { ...(options.env ?? process.env), ANDROID_ADB_SERVER_PORT: String(adbPort) },
      },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== "number") {
          // Spawn failure or timeout kill, not an exit status.
          reject(new Error(`adb ${args.join(" ")} failed: ${error.message}${stderr ? `\n${stderr}` : ""}`));
          return;
        }
        resolve({ code: typeof error?.code === "number" ? error.code : 0, stdout, stderr });
      },
    );
    // adb may exit before reading its stdin (e.g. `adb disconnect`); the
    // resulting EPIPE is expected and says nothing about the command.
    child.stdin?.on("error", () => {});
    child.stdin?.end(options.input ?? "");
  });
}
