import { Errors } from "@farm/shared/errors";
import { ActionFailed, type ActionKind } from "../ownership/device-ownership.js";
import type { DeviceJobs } from "./device-job.js";
import { shQuote } from "./shell-quote.js";

export interface SetPropRequest {
  key: string;
  value: string;
}

/**
 * `farm device setprop`: sets a system property in a device job. Proven only
 * by the job's completion record, never by the property's value: the value
 * may have been set by someone else, or before.
 */
export function setPropAction(jobs: DeviceJobs): ActionKind<SetPropRequest, Record<string, never>> {
  return {
    kind: "setprop",
    journalRequest: (req) => ({ key: req.key, value: req.value }),
    async dispatch(device, req, action, signal, progress) {
      const r = await jobs.run(device.serial, `setprop ${shQuote(req.key)} ${shQuote(req.value)}`, action, signal, progress);
      if (r.exitCode !== 0) {
        const stderr = r.stderr.toString("utf8").trim();
        throw new ActionFailed(`setprop exited ${r.exitCode}: ${stderr}`, Errors.SETPROP_FAILED, { exitCode: r.exitCode, stderr, record: r.record });
      }
      return { result: {}, receipt: { exitCode: 0, provenBy: r.provenBy, record: r.record } };
    },
    prove: (device, action, signal) => jobs.prove(device.serial, action, signal),
    acknowledge: (device, action) => jobs.acknowledge(device.serial, action),
  };
}
