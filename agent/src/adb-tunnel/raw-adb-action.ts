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
 * from StartAdbTunnel until the tunnel closes. Its owner's own farm changes
 * run beside it (taking turns, each receipt marked concurrentRawAdb);
 * anyone else's are refused at once as busy. Open and close are one entry;
 * what the caller's raw adb streams did to the phone is unknown and stays
 * so: nothing is left on the device that could prove it (prove never does).
 */
export function rawAdbAction(): ActionKind<RawAdbRequest, RawAdbResult> {
  return {
    kind: RAW_ADB_KIND,
    holderLabel: "remote adb tunnel",
    sharedWithRequester: {
      nextStep: (serial) => `its owner runs \`farm adb disconnect --device ${serial}\` (or the lease ends)`,
      marker: (req) => ({ tunnelId: (req as RawAdbRequest).tunnel.tunnelId, changes: "unknown: a remote adb tunnel was open on the phone meanwhile" }),
    },
    // The lease it belongs to: when that lease ends, an entry left unresolved (a crashed agent) is settled by it.
    journalRequest: (req) => ({ tunnelId: req.tunnel.tunnelId, ...(req.tunnel.leaseId ? { leaseId: req.tunnel.leaseId } : {}) }),
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
