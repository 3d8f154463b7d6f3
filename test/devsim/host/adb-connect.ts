import { runAdb } from "./adb-cli.js";
import { waitForDeviceState } from "./device-watch.js";
import { hostRequest, parseDeviceList } from "./host-client.js";

export interface AdbConnectOptions {
  /** Deadline for the device to become `device` / disappear (default 10 s). */
  timeoutMs?: number;
}

/**
 * `adb connect HOST:PORT` with the real CLI, then waits until the server
 * lists the serial as `device`. Resolves to the adb serial (`HOST:PORT`).
 */
export async function adbConnect(adbPort: number, host: string, port: number, options: AdbConnectOptions = {}): Promise<string> {
  const serial = `${host}:${port}`;
  const output = await connectOnce(adbPort, serial, options);
  if (/^already connected to/m.test(output)) {
    // adb answers "already connected" for a transport it is still retrying
    // (offline after the device vanished) and does nothing; its next retry may
    // be 10 s away. Drop the stale transport and connect afresh.
    const state = parseDeviceList(await hostRequest(adbPort, "host:devices")).get(serial);
    if (state !== "device") {
      await adbDisconnect(adbPort, host, port, options);
      await connectOnce(adbPort, serial, options);
    }
  }
  await waitForDeviceState(adbPort, serial, "device", options);
  return serial;
}

async function connectOnce(adbPort: number, serial: string, options: AdbConnectOptions): Promise<string> {
  const result = await runAdb(adbPort, ["connect", serial], { timeoutMs: (options.timeoutMs ?? 10_000) + 5_000 });
  const output = `${result.stdout}${result.stderr}`.trim();
  if (!/^(connected to|already connected to)/m.test(output)) {
    throw new Error(`adb connect ${serial} failed (exit ${result.code}): ${output}`);
  }
  return output;
}

/**
 * `adb disconnect HOST:PORT` with the real CLI, then waits until the server
 * no longer lists it. Succeeds if it was not connected.
 */
export async function adbDisconnect(adbPort: number, host: string, port: number, options: AdbConnectOptions = {}): Promise<void> {
  const serial = `${host}:${port}`;
  const result = await runAdb(adbPort, ["disconnect", serial], { timeoutMs: (options.timeoutMs ?? 10_000) + 5_000 });
  const output = `${result.stdout}${result.stderr}`.trim();
  if (!/^disconnected /m.test(output) && !/no such device/.test(output)) {
    throw new Error(`adb disconnect ${serial} failed (exit ${result.code}): ${output}`);
  }
  await waitForDeviceState(adbPort, serial, "gone", options);
}
