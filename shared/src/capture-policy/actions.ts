/** Action names of the policy, and how they map onto the timeline's step kinds. */

/** What a rule's `on.action` may name. */
export const POLICY_ACTIONS = ["tap", "longPress", "type", "swipe", "key", "shell", "install", "setprop", "reboot"] as const;
export type PolicyAction = (typeof POLICY_ACTIONS)[number];

/** SessionStep.action words: routed actions, then steps the client appends. */
export const STEP_ACTIONS = [
  "tap",
  "swipe",
  "text",
  "key",
  "shell",
  "setprop",
  "install",
  "reboot",
  "app-endpoint",
  "remove-forward",
  "ui-tree",
  "evidence",
  "assert-visual",
  "wait",
] as const;

/**
 * The step kind a policy action matches. The policy says `type` where the
 * timeline says `text`; farm has no long press yet, so `longPress` names a
 * kind no recorded step has (a rule on it never fires today).
 */
export function stepActionOf(action: PolicyAction): string {
  return action === "type" ? "text" : action;
}

/** A steps file may use the policy's words too: `type` is the step kind `text`. */
export function normalizeStepAction(action: string): string {
  return action === "type" ? "text" : action;
}
