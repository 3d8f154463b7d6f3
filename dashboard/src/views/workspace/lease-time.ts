/** Time left as a countdown: "29:58", "1:02:03"; "0:00" once past. */
export function countdown(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, "0");
  const ss = String(s % 60).padStart(2, "0");
  return s >= 3600 ? `${Math.floor(s / 3600)}:${mm}:${ss}` : `${Math.floor(s / 60)}:${ss}`;
}

/** The TTL a renewal asks for so the lease ends `extraMs` later than it would now (renewing counts from now), within the coordinator's 1 s..24 h. */
export function renewalTtl(expiresAtMs: number, nowMs: number, extraMs: number): number {
  return Math.min(24 * 3_600_000, Math.max(1_000, expiresAtMs - nowMs) + extraMs);
}

/** A clock time as people read it: "14:05" (the browser's zone). */
export function clock(ms: number): string {
  const d = new Date(ms);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}
