// How actions in the activity log read for people: names, which failures
// are worth listing, and whether an action changed the phone.

/** "sendInput" → "Send input", "captureEvidence" → "Capture evidence" (RPC names as logged). */
export function readableAction(command: string): string {
  const words = command.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Outcomes that are someone's deliberate end of a thing (a tunnel closed, a call cancelled), not failures. */
const DELIBERATE = new Set(["TUNNEL_CLOSED", "CALL_CANCELLED", "LEASE_WAIT_CANCELLED"]);

export function isFailure(outcome: string): boolean {
  return outcome !== "ok" && !DELIBERATE.has(outcome);
}

/**
 * Failures decided before anything reached the phone: the caller, the lease,
 * the route, or the element to act on (an element that is not there is
 * never tapped).
 */
const NOTHING_DONE = new Set([
  "INVALID_ARGUMENT",
  "UNAUTHENTICATED",
  "PERMISSION_DENIED",
  "LEASE_REQUIRED",
  "LEASE_HELD_BY_OTHER",
  "LEASE_EXPIRED",
  "LEASE_RELEASED",
  "DEVICE_OFFLINE",
  "DEVICE_NOT_FOUND",
  "ELEMENT_NOT_FOUND",
]);

/**
 * What a device-changing action did to the phone, as far as its outcome
 * tells: "changed" when it succeeded, "unchanged" when it failed before
 * reaching the phone, "unknown" otherwise (it may have).
 */
export function changeOf(outcome: string): "changed" | "unchanged" | "unknown" {
  if (outcome === "ok") return "changed";
  return NOTHING_DONE.has(outcome) ? "unchanged" : "unknown";
}
