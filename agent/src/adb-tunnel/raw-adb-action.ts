import type { ActionKind } from "../ownership/device-ownership.js";
import type { AdbTunnel } from "./adb-tunnel.js";

export const RAW_ADB_KIND = "raw-adb";

export interface RawAdbRequest {
  tunnel: AdbTunnel;
  /** Told once the action holds the device lock and the tunnel takes streams. */
  onStarted: (actionId: string) => void;
}

export interface RawAdbResult {
  /** Why the tunnel closed. */
  reason: string;
}

/**
 * A remote adb tunnel as one journaled action: it holds the phone's lock
 * from StartAdbTunnel until the tunnel closes, so every other farm change
 * to the phone is refused as busy meanwhile. Open and close are one entry;
 * what the caller's raw adb streams did to the phone is unknown and stays
 * so: nothing is left on the device that could prove it (prove never does).
 */
export function rawAdbAction(): ActionKind<RawAdbRequest, RawAdbResult> {
  return {
    kind: RAW_ADB_KIND,
    holderLabel: "remote adb tunnel",
    journalRequest: (req) => ({ tunnelId: req.tunnel.tunnelId }),
    async dispatch(device, req, action, signal, progress) {
      const tunnel = req.tunnel;
      tunnel.attach(action.actionId, device.identity.physicalId, progress);
      req.onStarted(action.actionId);
      const reason = await tunnel.until(signal);
      await tunnel.closeStreams();
      return { result: { reason }, receipt: tunnel.receipt(reason) };
    },
    prove: () => Promise.resolve(undefined),
  };
}
