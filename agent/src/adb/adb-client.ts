// adbkit is CommonJS; from ESM its default import is module.exports.
import adbkit from "@devicefarmer/adbkit";
import type { Client, DeviceClient } from "@devicefarmer/adbkit";

// Vite (the unit tests) honours adbkit's __esModule flag and gives its
// exports.default, the Adb class itself, where Node gives module.exports.
const Adb = (adbkit as { Adb?: typeof adbkit.Adb }).Adb ?? (adbkit as unknown as typeof adbkit.Adb);

export type AdbClient = Client;
export type AdbDeviceClient = DeviceClient;

export interface AdbServerAddress {
  host: string;
  port: number;
}

/** Client for the adb server this agent uses (not necessarily 5037). */
export function createAdbClient(addr: AdbServerAddress): AdbClient {
  return Adb.createClient({ host: addr.host, port: addr.port });
}

/** Reads a shell command's whole output as text. */
export async function shellText(device: AdbDeviceClient, command: string): Promise<string> {
  const stream = await device.shell(command);
  const buf = await Adb.util.readAll(stream);
  return buf.toString("utf8");
}
