import type { AdbServerAddress } from "../adb-client.js";
import { openDeviceService } from "../adb-service.js";
import type { ActionKind } from "../device-ownership.js";
import { toDispatchFailure } from "./shell-outcome.js";

/**
 * `farm reboot`: restarts the phone. Proven afterwards by a boot id that
 * differs from the one recorded when the action was journaled.
 */
export function rebootAction(adb: AdbServerAddress): ActionKind<Record<string, never>, Record<string, never>> {
  return {
    kind: "reboot",
    journalRequest: () => ({}),
    async dispatch(device, _req, _action, signal) {
      try {
        const { socket } = await openDeviceService(adb, device.serial, "reboot:", signal);
        // adbd answers and drops the connection as it goes down.
        await new Promise<void>((resolve) => {
          socket.once("close", () => resolve());
          socket.resume();
        });
      } catch (err) {
        throw toDispatchFailure(err);
      }
      return { result: {}, receipt: { provenBy: "reboot service accepted", bootIdBefore: device.facts.bootId } };
    },
    async prove(device, action) {
      if (!device.facts.bootId || device.facts.bootId === action.bootId) return undefined;
      return { provenBy: "boot id changed", bootIdBefore: action.bootId, bootIdAfter: device.facts.bootId };
    },
  };
}
