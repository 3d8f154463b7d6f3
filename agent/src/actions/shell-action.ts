import type { AdbServerAddress } from "../adb-client.js";
import { shellV2 } from "../adb-shell.js";
import type { ActionKind } from "../device-ownership.js";
import { toDispatchFailure } from "./shell-outcome.js";

export interface ShellRequest {
  command: string;
}

export interface ShellOutput {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
}

/** Where the device keeps each managed shell action's completion record. */
export const JOB_DIR = "/data/local/tmp/farm-jobs";

/**
 * `farm device shell`: runs a command on the device. The device itself
 * records the exit status under JOB_DIR when the command ends, so after an
 * agent crash reconciliation can prove completion by reading that record
 * (and only then); the command is never run again.
 */
export function shellAction(adb: AdbServerAddress): ActionKind<ShellRequest, ShellOutput> {
  return {
    kind: "shell",
    journalRequest: (req) => ({ command: req.command }),
    async dispatch(device, req, action, signal) {
      const record = `${JOB_DIR}/${action.actionId}.done`;
      const wrapped = `${req.command}
farm_rc=$?; mkdir -p ${JOB_DIR} 2>/dev/null; echo $farm_rc > ${record} 2>/dev/null; exit $farm_rc`;
      try {
        const r = await shellV2(adb, device.serial, wrapped, signal);
        return {
          result: { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr },
          receipt: { exitCode: r.exitCode, stdoutBytes: r.stdout.length, stderrBytes: r.stderr.length, truncated: r.truncated, provenBy: "exit status" },
        };
      } catch (err) {
        throw toDispatchFailure(err);
      }
    },
    async prove(device, action, signal) {
      const r = await shellV2(adb, device.serial, `cat ${JOB_DIR}/${action.actionId}.done`, signal);
      const text = r.stdout.toString("utf8").trim();
      if (r.exitCode !== 0 || !/^\d+$/.test(text)) return undefined;
      return { exitCode: Number(text), provenBy: `device job record ${JOB_DIR}/${action.actionId}.done`, bootIdAtProof: device.facts.bootId };
    },
  };
}
