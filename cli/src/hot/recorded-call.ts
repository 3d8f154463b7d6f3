import type { OneCallOutcome } from "./one-call.js";

/**
 * What the plain runner (plain-run.ts, lib/one.cjs) hands to the full CLI
 * (lib/hot.cjs) when its one request was not a plain success: the call it
 * already made, so that the full CLI judges that answer instead of sending
 * the command again (a shell command runs once), and any stop signal that
 * came meanwhile. Only plain data crosses: the two bundles share no classes.
 */
export interface Handover {
  /** The call made, when one was tried (absent: nothing was tried; the full CLI starts from the beginning). */
  call?: RecordedCall | undefined;
  /** Removes the plain runner's signal handlers (the full CLI's are in place by then) and says which signal came, if one did. */
  takeSignal(): NodeJS.Signals | undefined;
}

export interface RecordedCall {
  /** Which hot command made it: its recorded call is used only by the same command. */
  command: "shell" | "devices";
  outcome: OneCallOutcome;
  /** The x-request-id it was sent with, and when it started (performance.now()), for --verbose. */
  requestId: string;
  started: number;
}

let slot: RecordedCall | undefined;

/** Set by main() for its one run (undefined clears it). */
export function presetRecordedCall(call: RecordedCall | undefined): void {
  slot = call;
}

/** The call already made for this command, once: the hot command's action uses it instead of calling again. */
export function takeRecordedCall(command: RecordedCall["command"]): RecordedCall | undefined {
  const call = slot?.command === command ? slot : undefined;
  slot = undefined;
  return call;
}
