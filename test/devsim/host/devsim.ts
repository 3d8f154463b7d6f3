import type { LatencyProfileName } from "../latency/latency-profiles.js";
import { DEVICE_PROFILES } from "../device/device-profiles.js";
import { SimDevice, randomSerialno, type SimDeviceOptions } from "../device/sim-device.js";
import { DEFAULT_ADB_SERVER_PORT } from "../transport/port-rules.js";
import { startControlServer, type ControlServer } from "../control/control-server.js";
import { runSchedule, type Scenario } from "../control/scenario.js";
import { adbConnect, adbDisconnect } from "./adb-connect.js";
import { ensureAdbServer } from "./adb-server.js";

/** One phone to start: SimDevice options plus how many adb serials it gets. */
export interface DevsimDeviceSpec extends SimDeviceOptions {
  /** Ports (adb serials) the same phone is reachable on, e.g. 2 for a phone on USB and Wi-Fi (default 1). */
  serials?: number;
}

export interface DevsimOptions {
  /** How many devices (each a different phone model), or one spec per device (ignored with a scenario). */
  devices?: number | DevsimDeviceSpec[];
  /** adb server to connect them to; default $ANDROID_ADB_SERVER_PORT or 5037. */
  adbPort?: number;
  /** Run `adb connect` for each device (default true). */
  connect?: boolean;
  /** Interface to listen on (default 127.0.0.1). */
  host?: string;
  /** Deadline per device for connect/disconnect (default 10 s). */
  timeoutMs?: number;
  /** Start the fault-injection control API (JSON over HTTP on loopback; default false). */
  control?: boolean;
  /** Devices, initial faults and a fault schedule; overrides `devices`. */
  scenario?: Scenario;
  /** Where schedule events are logged. */
  log?: (message: string) => void;
  /** Latency profile of every device that does not name its own (default instant). */
  latency?: LatencyProfileName;
}

export interface DevsimDevice {
  /** adb serial (`HOST:PORT`), as `adb devices` lists it. */
  serial: string;
  port: number;
  device: SimDevice;
}

export interface Devsim {
  devices: DevsimDevice[];
  adbPort: number;
  /** Control API base URL when started with `control: true`. */
  controlUrl: string | undefined;
  /** Disconnects the devices from adb (if connected) and closes them. Idempotent. */
  stop(): Promise<void>;
}

/** adb server port from ANDROID_ADB_SERVER_PORT, else 5037 (the CLI's rule). */
export function adbPortFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const port = Number(env["ANDROID_ADB_SERVER_PORT"]);
  return Number.isInteger(port) && port > 0 && port < 65536 ? port : DEFAULT_ADB_SERVER_PORT;
}

/**
 * Options for device i of n generated ones: profiles cycle through the
 * catalogue, and models get a suffix on repeats so every device differs.
 */
export function generatedDeviceOptions(count: number): SimDeviceOptions[] {
  const serials = new Set<string>();
  return Array.from({ length: count }, (_, index) => {
    let serialno = randomSerialno();
    while (serials.has(serialno)) serialno = randomSerialno();
    serials.add(serialno);
    const profile = DEVICE_PROFILES[index % DEVICE_PROFILES.length]!;
    const round = Math.floor(index / DEVICE_PROFILES.length);
    return {
      serialno,
      profile,
      ...(round > 0 ? { props: { "ro.product.model": `${profile.model} (${round + 1})` } } : {}),
    };
  });
}

/** Starts simulated devices and (by default) connects them to an adb server. */
export async function startDevsim(options: DevsimOptions): Promise<Devsim> {
  const adbPort = options.adbPort ?? adbPortFromEnv();
  const host = options.host ?? "127.0.0.1";
  const connect = options.connect ?? true;
  const timeout = { timeoutMs: options.timeoutMs ?? 10_000 };
  const scenario = options.scenario;
  const deviceOptions: DevsimDeviceSpec[] = scenario
    ? scenario.devices
    : typeof options.devices === "number" || options.devices === undefined
    ? generatedDeviceOptions(options.devices ?? 1)
    : options.devices.map((device, index) => ({ profile: index, ...device }));

  const started: DevsimDevice[] = [];
  const connected = new Set<DevsimDevice>();
  let stopping: Promise<void> | undefined;
  let control: ControlServer | undefined;
  let cancelSchedule = () => {};
  const stop = () => (stopping ??= (async () => {
    cancelSchedule();
    await control?.close();
    await Promise.all(started.map(async (entry) => (connected.has(entry) ? adbDisconnect(adbPort, host, entry.port, timeout).catch(() => undefined) : undefined)));
    await Promise.all([...new Set(started.map((entry) => entry.device))].map((device) => device.dispose()));
  })());

  try {
    for (const deviceOption of deviceOptions) {
      const device = new SimDevice({ ...(options.latency ? { latency: options.latency } : {}), ...deviceOption });
      const serials = deviceOption.serials ?? 1;
      for (let alias = 0; alias < serials; alias++) {
        const port = await device.listen(host);
        started.push({ serial: `${host}:${port}`, port, device });
      }
    }
    if (connect) {
      // One server first: parallel `adb connect`s would each race to start one.
      await ensureAdbServer(adbPort, timeout.timeoutMs);
      await Promise.all(
        started.map(async (entry) => {
          await adbConnect(adbPort, host, entry.port, timeout);
          connected.add(entry);
        }),
      );
    }
    if (options.control) control = await startControlServer(() => started);
    const devices = [...new Set(started.map((entry) => entry.device))];
    if (scenario) {
      scenario.initialFaults.forEach((faults, index) => faults && devices[index]?.faults.set(faults));
      cancelSchedule = runSchedule(scenario.schedule, devices, options.log);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { devices: started, adbPort, controlUrl: control?.url, stop };
}
