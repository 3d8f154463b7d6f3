import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2 } from "../adb/adb-shell.js";
import { AdbServiceError } from "../adb/adb-service.js";

export type OutputFailureCode = "DEVICE_OFFLINE" | "DEADLINE_EXCEEDED" | "ADB_CONNECTION_LOST" | "ADB_REFUSED" | "OUTPUT_TOO_LARGE" | "COMMAND_FAILED";

export interface ShellOutput {
  /** stdout as received, up to maxBytes; partial when `failure` is set. */
  bytes: Buffer;
  /** The command's exit status; null when it never arrived (the stream was cut or given up). */
  exitCode: number | null;
  stderr: string;
  failure?: { code: OutputFailureCode; message: string };
}

/**
 * Runs a command whose stdout is a document (a PNG, an XML dump) over adb's
 * shell protocol v2 and keeps every byte, up to `maxBytes`. Unlike `exec:`,
 * whose end looks the same whether the command finished or the phone
 * vanished, v2 ends with the command's exit status: bytes without one were
 * cut short and are reported as a failed transfer, never as a whole output.
 */
export async function shellOutput(adb: AdbServerAddress, serial: string, command: string, opts: { timeoutMs: number; maxBytes: number }): Promise<ShellOutput> {
  const chunks: Buffer[] = [];
  let total = 0;
  let tooLarge = false;
  const limit = new AbortController();
  const signal = AbortSignal.any([AbortSignal.timeout(Math.max(1, Math.ceil(opts.timeoutMs))), limit.signal]);
  const bytes = () => Buffer.concat(chunks);
  try {
    const r = await shellV2(adb, serial, command, signal, {
      onStdout: (data) => {
        if (tooLarge) return;
        total += data.length;
        if (total > opts.maxBytes) {
          chunks.push(Buffer.from(data.subarray(0, data.length - (total - opts.maxBytes))));
          tooLarge = true;
          limit.abort();
          return;
        }
        chunks.push(Buffer.from(data));
      },
    });
    const stderr = r.stderr.toString("utf8").trim().slice(0, 2048);
    if (r.exitCode !== 0) return { bytes: bytes(), exitCode: r.exitCode, stderr, failure: { code: "COMMAND_FAILED", message: `\`${command}\` exited with ${r.exitCode}${stderr ? `: ${stderr.slice(0, 500)}` : ""}` } };
    return { bytes: bytes(), exitCode: 0, stderr };
  } catch (err) {
    if (tooLarge) return { bytes: bytes(), exitCode: null, stderr: "", failure: { code: "OUTPUT_TOO_LARGE", message: `output exceeds ${opts.maxBytes} bytes` } };
    const e = err as AdbServiceError;
    const code: OutputFailureCode = e instanceof AdbServiceError ? e.code : "ADB_CONNECTION_LOST";
    return { bytes: bytes(), exitCode: null, stderr: "", failure: { code, message: `${e.message} (after ${total} bytes)` } };
  }
}
