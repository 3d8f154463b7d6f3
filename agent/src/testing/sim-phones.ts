import type { AdbServerAddress } from "../adb/adb-client.js";

/**
 * Simulated phones behind a real adb server, for the agent's own tests.
 * test/devsim is another TypeScript project (it builds after the agent), so
 * it is loaded by path; `P` is the part of a simulated phone a test uses.
 */
export interface SimPhones<P> {
  addr: AdbServerAddress;
  phones: { serial: string; device: P }[];
  /** Stops devsim, then the adb server; a second call waits for the first. */
  stop(): Promise<void>;
}

interface Devsim<P> {
  startAdbServer(): Promise<{ port: number; stop(): Promise<void> }>;
  startDevsim(opts: { devices: number | Record<string, unknown>[]; adbPort: number }): Promise<{ devices: { serial: string; device: P }[]; stop(): Promise<void> }>;
}
const DEVSIM = "../../../test/devsim/index.js";

/** Starts an adb server and `devices` (a count or devsim device specs) connected to it. */
export async function startSimPhones<P = unknown>(devices: number | Record<string, unknown>[]): Promise<SimPhones<P>> {
  const devsim = (await import(DEVSIM)) as Devsim<P>;
  const adb = await devsim.startAdbServer();
  try {
    const sim = await devsim.startDevsim({ devices, adbPort: adb.port });
    let stopped: Promise<void> | undefined;
    return {
      addr: { host: "127.0.0.1", port: adb.port },
      phones: sim.devices,
      // Once: a test may stop its phones itself, and its afterEach stops them again.
      stop: () => (stopped ??= (async () => {
        await sim.stop();
        await adb.stop();
      })()),
    };
  } catch (err) {
    await adb.stop();
    throw err;
  }
}
