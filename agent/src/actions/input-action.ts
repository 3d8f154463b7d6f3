import { Errors } from "@farm/shared/errors";
import { ActionFailed, type ActionKind } from "../ownership/device-ownership.js";
import type { DeviceJobs } from "./device-job.js";
import { shQuote } from "./shell-quote.js";

export type InputRequest =
  | { kind: "tap"; x: number; y: number; element?: TapTarget }
  | { kind: "swipe"; x1: number; y1: number; x2: number; y2: number; durationMs: number }
  | { kind: "text"; text: string }
  | { kind: "key"; key: string };

/**
 * For a tap by element: what the selector resolved to before the tap, kept
 * in the journal so the action names its target (the command itself only
 * carries the point).
 */
export interface TapTarget {
  /** The selector as asked: one of resourceId, text, contentDesc. */
  selector: Record<string, string>;
  type: string;
  text: string;
  resourceId: string;
  contentDesc: string;
  /** `[left,top][right,bottom]`, as UIAutomator writes bounds. */
  bounds: string;
}

/** The `input` command line for a request. */
export function inputCommand(req: InputRequest): string {
  switch (req.kind) {
    case "tap":
      return `input tap ${req.x} ${req.y}`;
    case "swipe":
      return `input swipe ${req.x1} ${req.y1} ${req.x2} ${req.y2}${req.durationMs ? ` ${req.durationMs}` : ""}`;
    case "text":
      // `input text` treats %s as a space; spaces themselves must not split the argument.
      return `input text ${shQuote(req.text.replace(/ /g, "%s"))}`;
    case "key":
      return `input keyevent ${shQuote(req.key)}`;
  }
}

/**
 * `farm input`: physical input, sent by a device job so that its completion
 * record (not the screen, which anything may change) proves it ran.
 */
export function inputAction(jobs: DeviceJobs): ActionKind<InputRequest, Record<string, never>> {
  return {
    kind: "input",
    journalRequest: (req) => ({ ...req }),
    async dispatch(device, req, action, signal, progress) {
      const r = await jobs.run(device.serial, inputCommand(req), action, signal, progress);
      if (r.exitCode !== 0) {
        const stderr = r.stderr.toString("utf8").trim();
        throw new ActionFailed(`input exited ${r.exitCode}: ${stderr}`, Errors.INPUT_FAILED, { exitCode: r.exitCode, stderr, record: r.record });
      }
      return { result: {}, receipt: { exitCode: 0, provenBy: r.provenBy, record: r.record } };
    },
    prove: (device, action, signal) => jobs.prove(device.serial, action, signal),
    acknowledge: (device, action) => jobs.acknowledge(device.serial, action),
  };
}
