import { Errors } from "@farm/shared/errors";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { openDeviceService } from "../adb/adb-service.js";
import { DispatchFailure, type ActionKind } from "../ownership/device-ownership.js";
import type { DeviceWatcher } from "../devices/device-watcher.js";
import { toDispatchFailure } from "./shell-outcome.js";

/** What a reboot's dispatch saw, in order; kept in the journal as its proof. */
interface RebootProgress {
  acknowledgedAt?: number;
  disconnectedAt?: number;
}

/**
 * `farm reboot`: restarts the phone. Proven only by the chain this agent
 * saw itself: adbd acknowledged `reboot:`, then dropped the connection, then
 * the phone came back with a new boot id. A new boot id alone proves
 * nothing (someone else may have rebooted it), so a reboot that was
 * acknowledged but never went down stays unknown for good.
 */
export function rebootAction(adb: AdbServerAddress, watcher: DeviceWatcher): ActionKind<Record<string, never>, Record<string, never>> {
  return {
    kind: "reboot",
    journalRequest: () => ({}),
    async dispatch(device, _req, action, signal, progress) {
      const seen: RebootProgress = {};
      progress.phase = "sent";
      let socket;
      try {
        ({ socket } = await openDeviceService(adb, device.serial, "reboot:", signal));
      } catch (err) {
        throw toDispatchFailure(err);
      }
      progress.phase = "accepted";
      seen.acknowledgedAt = Date.now();
      progress.note({ ...seen });
      // adbd answers, then drops the connection as it goes down.
      const closed = await new Promise<boolean>((resolve) => {
        const onAbort = () => {
          socket.destroy();
          resolve(false);
        };
        if (signal.aborted) return onAbort();
        signal.addEventListener("abort", onAbort, { once: true });
        socket.once("close", () => {
          signal.removeEventListener("abort", onAbort);
          resolve(true);
        });
        socket.resume();
      });
      if (!closed) throw new DispatchFailure("the phone acknowledged the reboot but did not go down before the deadline", true, Errors.COMMAND_TIMEOUT);
      seen.disconnectedAt = Date.now();
      progress.note({ ...seen });
      const bootIdAfter = await newBootId(watcher, device.identity.physicalId, action.bootId, signal);
      if (bootIdAfter === undefined) throw new DispatchFailure("the phone went down for the reboot but was not back before the deadline", true, Errors.COMMAND_TIMEOUT);
      return { result: {}, receipt: { provenBy: "reboot acknowledged, connection dropped, new boot id", bootIdBefore: action.bootId, bootIdAfter, ...seen } };
    },
    async prove(device, action) {
      const seen = (action.progressJson ? JSON.parse(action.progressJson) : {}) as RebootProgress;
      if (!seen.acknowledgedAt || !seen.disconnectedAt) return undefined;
      if (!device.facts.bootId || device.facts.bootId === action.bootId) return undefined;
      return { provenBy: "reboot acknowledged, connection dropped, new boot id", bootIdBefore: action.bootId, bootIdAfter: device.facts.bootId, ...seen };
    },
  };
}

/** Waits until any serial of the phone is online with a boot id other than `before`. */
function newBootId(watcher: DeviceWatcher, physicalId: string, before: string, signal: AbortSignal): Promise<string | undefined> {
  const current = (): string | undefined => {
    for (const serial of watcher.aliasesOf(physicalId)) {
      const d = watcher.device(serial);
      if (d?.state === "device" && d.facts.bootId && d.facts.bootId !== before) return d.facts.bootId;
    }
    return undefined;
  };
  return new Promise((resolve) => {
    const now = current();
    if (now || signal.aborted) return resolve(now);
    const stop = watcher.onEvent(() => {
      const found = current();
      if (found) finish(found);
    });
    const onAbort = () => finish(undefined);
    signal.addEventListener("abort", onAbort, { once: true });
    function finish(value: string | undefined) {
      stop();
      signal.removeEventListener("abort", onAbort);
      resolve(value);
    }
  });
}
