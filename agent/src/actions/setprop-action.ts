import type { AdbServerAddress } from "../adb-client.js";
import { shellV2 } from "../adb-shell.js";
import { ActionFailed, type ActionKind } from "../device-ownership.js";
import { shQuote } from "./shell-quote.js";
import { toDispatchFailure } from "./shell-outcome.js";

export interface SetPropRequest {
  key: string;
  value: string;
}

/**
 * `farm device setprop`: sets a system property. Its effect is provable by
 * reading the property back, which is what reconciliation does.
 */
export function setPropAction(adb: AdbServerAddress): ActionKind<SetPropRequest, Record<string, never>> {
  return {
    kind: "setprop",
    journalRequest: (req) => ({ key: req.key, value: req.value }),
    async dispatch(device, req, _action, signal) {
      let r;
      try {
        r = await shellV2(adb, device.serial, `setprop ${shQuote(req.key)} ${shQuote(req.value)}`, signal);
      } catch (err) {
        throw toDispatchFailure(err);
      }
      if (r.exitCode !== 0) {
        const stderr = r.stderr.toString("utf8").trim();
        throw new ActionFailed(`setprop exited ${r.exitCode}: ${stderr}`, "SETPROP_FAILED", { exitCode: r.exitCode, stderr });
      }
      return { result: {}, receipt: { exitCode: 0, provenBy: "exit status" } };
    },
    async prove(device, action, signal) {
      const req = JSON.parse(action.requestJson) as SetPropRequest;
      const r = await shellV2(adb, device.serial, `getprop ${shQuote(req.key)}`, signal);
      const observed = r.stdout.toString("utf8").replace(/\r?\n$/, "");
      if (r.exitCode !== 0 || observed !== req.value) return undefined;
      return { observed, provenBy: `getprop ${req.key}` };
    },
  };
}
