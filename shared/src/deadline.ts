/**
 * The deadline one hop gives the next (coordinator → agent, agent → its own
 * lock wait): a little earlier than its own, so the next hop's answer (an
 * action id and what is known of its dispatch) still reaches the caller in
 * time. It keeps 20% of the remaining budget, at most `maxMarginMs`.
 */
export function hopDeadline(deadlineMs: number, maxMarginMs = 1_000, now = Date.now()): number {
  const remaining = Math.max(0, deadlineMs - now);
  return deadlineMs - Math.min(maxMarginMs, remaining * 0.2);
}
