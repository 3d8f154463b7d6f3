import type { ActionKind } from "../ownership/device-ownership.js";
import type { DeviceJobs } from "./device-job.js";

export interface ShellRequest {
  command: string;
}

export interface ShellOutput {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
}

/**
 * `farm device shell`: runs a command on the device as a detached job (see
 * device-job.ts). After a cut stream, a deadline or an agent restart, only
 * the job's own completion record settles it; it is never run again.
 */
export function shellAction(jobs: DeviceJobs): ActionKind<ShellRequest, ShellOutput> {
  return {
    kind: "shell",
    journalRequest: (req) => ({ command: req.command }),
    async dispatch(device, req, action, signal, progress) {
      const r = await jobs.run(device.serial, req.command, action, signal, progress);
      return {
        result: { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr },
        receipt: { exitCode: r.exitCode, stdoutBytes: r.stdout.length, stderrBytes: r.stderr.length, truncated: r.truncated, provenBy: r.provenBy, record: r.record },
      };
    },
    prove: (device, action, signal) => jobs.prove(device.serial, action, signal),
    acknowledge: (device, action) => jobs.acknowledge(device.serial, action),
  };
}
