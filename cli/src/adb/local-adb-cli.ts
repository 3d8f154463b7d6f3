import { execFile } from "node:child_process";
import { Errors } from "@farm/shared/error-codes";
import { CliError } from "../cli-error.js";

/** The user's own adb: the one on PATH, talking to their adb server (-P when a port was given). */
export interface LocalAdb {
  /** --adb-port / ANDROID_ADB_SERVER_PORT; undefined: adb's default (5037). */
  serverPort: number | undefined;
}

interface AdbOutput {
  code: number;
  text: string;
}

function runLocalAdb(adb: LocalAdb, args: readonly string[], timeoutMs: number): Promise<AdbOutput> {
  const argv = [...(adb.serverPort === undefined ? [] : ["-P", String(adb.serverPort)]), ...args];
  return new Promise((resolve, reject) => {
    const child = execFile("adb", argv, { timeout: timeoutMs, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
      const text = `${stdout}${stderr}`.trim();
      if (error && typeof error.code !== "number") {
        const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
        reject(new CliError(Errors.ADB_REFUSED, missing ? "adb is not on PATH: install the Android platform tools" : `adb ${args.join(" ")} did not finish: ${error.message}`, "adb"));
        return;
      }
      resolve({ code: typeof error?.code === "number" ? error.code : 0, text });
    });
    child.stdin?.end();
  });
}

/**
 * `adb connect SERIAL`. adb 29 answers once the endpoint's CNXN arrived
 * ("connected to") or after its own 10 s wait ("failed to connect"), with
 * exit status 0 either way, so the words decide.
 */
export async function adbConnect(adb: LocalAdb, serial: string): Promise<void> {
  const out = await runLocalAdb(adb, ["connect", serial], 30_000);
  if (/^(connected to|already connected to) /m.test(out.text)) return;
  throw new CliError(Errors.ADB_REFUSED, `adb connect ${serial} failed: ${out.text || `exit ${out.code}`}`, "adb");
}

/** `adb disconnect SERIAL`; "no such device" counts as done. Never throws: it is cleanup. */
export async function adbDisconnect(adb: LocalAdb, serial: string): Promise<string | undefined> {
  try {
    const out = await runLocalAdb(adb, ["disconnect", serial], 10_000);
    return /^disconnected |no such device/m.test(out.text) ? undefined : out.text || `exit ${out.code}`;
  } catch (err) {
    return (err as Error).message;
  }
}
