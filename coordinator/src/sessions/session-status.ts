import { SessionStatus } from "@farm/shared/gen/farm/v1/session_service_pb";
import type { SessionState } from "./session-store.js";

/** Stored states and their wire enum, both ways (UNSPECIFIED has no state). */
const toWire: Readonly<Record<SessionState, SessionStatus>> = {
  running: SessionStatus.RUNNING,
  passed: SessionStatus.PASSED,
  failed: SessionStatus.FAILED,
  lease_ended: SessionStatus.LEASE_ENDED,
};

export function sessionStatusOf(state: SessionState): SessionStatus {
  return toWire[state];
}

/** The stored state for a wire status, or undefined for UNSPECIFIED (and unknown numbers). */
export function sessionStateOf(status: SessionStatus): SessionState | undefined {
  return (Object.keys(toWire) as SessionState[]).find((s) => toWire[s] === status);
}
