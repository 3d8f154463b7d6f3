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

/**
 * How long past the deadline it sends a farm client keeps listening. The
 * coordinator answers at the deadline (it waits AGENT_ANSWER_GRACE_MS past
 * it for a late agent), and a loaded host delays that answer by GC pauses
 * and event-loop lag of some hundreds of ms: 2 s hears it, with room, and
 * still ends a call to a hung coordinator promptly.
 */
export const DEADLINE_GRACE_MS = 2_000;

/**
 * How long past the caller's deadline the coordinator waits for an agent's
 * answer (which carries its action id): half the client's grace, so that
 * the coordinator's own "no answer" still reaches the client in time.
 */
export const AGENT_ANSWER_GRACE_MS = DEADLINE_GRACE_MS / 2;
