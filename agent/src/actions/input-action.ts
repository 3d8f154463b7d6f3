import type { AdbServerAddress } from "../adb-client.js";
import { shellV2 } from "../adb-shell.js";
import { ActionFailed, type ActionKind } from "../device-ownership.js";
import { shQuote } from "./shell-quote.js";
import { toDispatchFailure } from "./shell-outcome.js";

export type InputRequest =
  | { kind: "tap"; x: number; y: number }
  | { kind: "swipe"; x1: number; y1: number; x2: number; y2: number; durationMs: number }
  | { kind: "text"; text: string }
  | { kind: "key"; key: string };

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
 * `farm input`: physical input. Its effect cannot be proven afterwards, so an
 * unknown outcome stays unresolved until an admin abandons it.
 */
export function inputAction(adb: AdbServerAddress): ActionKind<InputRequest, Record<string, never>> {
  return {
    kind: "input",
    journalRequest: (req) => ({ ...req }),
    async dispatch(device, req, _action, signal) {
      let r;
      try {
        r = await shellV2(adb, device.serial, inputCommand(req), signal);
      } catch (err) {
        throw toDispatchFailure(err);
      }
      if (r.exitCode !== 0) {
        const stderr = r.stderr.toString("utf8").trim();
        throw new ActionFailed(`input exited ${r.exitCode}: ${stderr}`, "INPUT_FAILED", { exitCode: r.exitCode, stderr });
      }
      return { result: {}, receipt: { exitCode: 0, provenBy: "exit status" } };
    },
    prove: async () => undefined,
  };
}
