import { hostRequest, parseDeviceList, trackDevices, type DeviceList } from "./host-client.js";

/**
 * adb 29 can miss a change for a tracker that connects while the change
 * happens (its first list predates the change, and the broadcast skips it),
 * so a slow `host:devices` check backs the tracker up.
 */
const FALLBACK_POLL_MS = 500;

/** A transport state as `adb devices` prints it, or 'gone' for not listed. */
export type WantedState = "device" | "offline" | "unauthorized" | "gone" | ((state: string | undefined) => boolean);

export interface WaitForDeviceOptions {
  /** Give up after this long (default 10 s). */
  timeoutMs?: number;
  host?: string;
}

function matches(wanted: WantedState, state: string | undefined): boolean {
  if (typeof wanted === "function") return wanted(state);
  return wanted === "gone" ? state === undefined : state === wanted;
}

/**
 * Waits until the adb server lists `serial` in the wanted state, driven by
 * track-devices updates (no polling). Resolves to the state seen.
 */
export async function waitForDeviceState(adbPort: number, serial: string, wanted: WantedState, options: WaitForDeviceOptions = {}): Promise<string | undefined> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  let last: DeviceList | undefined;
  let settle: ((state: string | undefined) => void) | undefined;
  const reached = new Promise<string | undefined>((resolve) => (settle = resolve));
  const tracker = await trackDevices(
    adbPort,
    (devices) => {
      last = devices;
      const state = devices.get(serial);
      if (matches(wanted, state)) settle?.(state);
    },
    options.host,
  );
  let timer: NodeJS.Timeout | undefined;
  const poll = setInterval(() => {
    hostRequest(adbPort, "host:devices", options.host).then(
      (text) => {
        const state = parseDeviceList(text).get(serial);
        if (matches(wanted, state)) settle?.(state);
      },
      () => undefined,
    );
  }, FALLBACK_POLL_MS);
  try {
    return await Promise.race([
      reached,
      tracker.done.then(() => {
        throw new Error(`adb server on port ${adbPort} stopped while waiting for ${serial}`);
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const seen = last ? JSON.stringify(Object.fromEntries(last)) : "nothing";
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${serial} to be ${typeof wanted === "string" ? wanted : "in the wanted state"}; adb lists ${seen}`));
        }, timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    clearInterval(poll);
    tracker.close();
  }
}
