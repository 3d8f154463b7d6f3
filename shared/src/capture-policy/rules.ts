import { normalizeStepAction, stepActionOf } from "./actions.js";
import { capturePoints, isInterval, type CaptureKind, type CaptureToken, type CaptureWhen } from "./capture-token.js";
import { idMatcher } from "./id-glob.js";
import type { SessionPolicy, Trigger } from "./policy.js";

/**
 * Which captures apply to a step, and when they must start.
 *
 * Triggers known before the action runs (the default list, per-action
 * `--capture`, `on: {action}` rules) are decided up front. Post-hoc
 * triggers (`event: screenChanged`, `result: error`) are known only once
 * the step has settled, but an interval capture (video, deviceLog) or a
 * `.before` capture cannot be started after the fact: those are started
 * *speculatively* on every step and kept only if the trigger fires. A
 * post-hoc rule's `.after` captures need no speculation: they are taken
 * after the step, only when it fired. See docs/session-policy.md.
 */

/** What is known of a step. `screenChanged` and `failed` only matter in the after phase. */
export interface StepFacts {
  /** The timeline's step kind ("tap", "text", ...); the policy's `type` is accepted for "text". */
  action: string;
  /** The primary target id: the selector's resource id, else the resolved element's; "" when none. */
  targetId?: string;
  screenChanged?: boolean;
  failed?: boolean;
  /** Per-action tokens (`--capture` on the one action). */
  capture?: readonly string[];
}

export type Phase = "before" | "after";

/** One capture point of a step and why it is there. */
export interface AppliedCapture {
  /** Canonical: "elements.after", "deviceLog.around" (an instant `around` is two points, .before and .after). */
  token: string;
  kind: CaptureKind;
  when: CaptureWhen;
  /** The first reason, in order default, per-action, rule 1, rule 2, ... */
  reason: string;
  reasons: string[];
  /**
   * Started before the step's outcome was known, for post-hoc rules only.
   * Before: start it, it may be dropped. After: it was, and is kept.
   */
  speculative: boolean;
}

type TriggerKind = "action" | "screenChanged" | "error";

export interface CompiledRule {
  /** "rule N", 1-based. */
  reason: string;
  trigger: Trigger;
  kind: TriggerKind;
  stepAction?: string;
  matchId?: (id: string) => boolean;
  points: CaptureToken[];
}

export interface CompiledPolicy {
  policy: SessionPolicy;
  defaults: CaptureToken[];
  rules: CompiledRule[];
}

const cache = new WeakMap<SessionPolicy, CompiledPolicy>();

function triggerKind(t: Trigger): TriggerKind {
  if ("action" in t) return "action";
  return "event" in t ? "screenChanged" : "error";
}

/** Tokens parsed and globs compiled once per policy (cached by object). */
export function compilePolicy(policy: SessionPolicy | CompiledPolicy): CompiledPolicy {
  if ("rules" in policy && "defaults" in policy) return policy;
  const hit = cache.get(policy);
  if (hit) return hit;
  const out: CompiledPolicy = {
    policy,
    defaults: capturePoints(policy.capture ?? []),
    rules: (policy.capturePolicy ?? []).map((r, i) => {
      const kind = triggerKind(r.on);
      const rule: CompiledRule = { reason: `rule ${i + 1}`, trigger: r.on, kind, points: capturePoints(r.capture) };
      if ("action" in r.on) {
        rule.stepAction = stepActionOf(r.on.action);
        if (r.on.idMatches !== undefined) rule.matchId = idMatcher(r.on.idMatches);
      }
      return rule;
    }),
  };
  cache.set(policy, out);
  return out;
}

/** Whether a rule's trigger fires on a step (post-hoc ones need the step's outcome). */
export function ruleFires(rule: CompiledRule, step: StepFacts): boolean {
  switch (rule.kind) {
    case "action":
      return normalizeStepAction(step.action) === rule.stepAction && (!rule.matchId || rule.matchId(step.targetId ?? ""));
    case "screenChanged":
      return step.screenChanged === true;
    case "error":
      return step.failed === true;
  }
}

/** A post-hoc rule must start this point before the action: it cannot be taken later. */
const needsSpeculation = (p: CaptureToken) => p.when === "before" || isInterval(p.kind);

/** The six capture points there are, in output order: by kind, before ahead of after. */
const SLOTS = ["screenshot.before", "screenshot.after", "elements.before", "elements.after", "video.around", "deviceLog.around"] as const;
const slotOf = (p: CaptureToken) => SLOTS.indexOf(p.token as (typeof SLOTS)[number]);

/**
 * The captures of a step in a phase.
 *
 * - `before`: the plan as far as it is known before the action: every point
 *   of the default, per-action and matching action rules (whatever its
 *   `when`), plus, marked speculative, the `.before` and interval points of
 *   every post-hoc rule.
 * - `after`: what the step keeps: the same definite points, plus every point
 *   of the post-hoc rules that fired (their speculative ones confirmed, their
 *   `.after` ones taken now). A speculative point started before and absent
 *   here is discarded (see discardedSpeculative).
 *
 * A point asked for by several sources is listed once with every reason;
 * it is speculative only when no definite source asks for it.
 */
export function capturesFor(policy: SessionPolicy | CompiledPolicy, step: StepFacts, phase: Phase): AppliedCapture[] {
  const c = compilePolicy(policy);
  return collect(c, step, phase, (rule) => ruleFires(rule, step));
}

/** capturesFor with the rules' firings given (explain works them out once per step). */
export function collect(c: CompiledPolicy, step: StepFacts, phase: Phase, fires: (rule: CompiledRule, index: number) => boolean): AppliedCapture[] {
  const acc: ({ point: CaptureToken; reasons: string[]; definite: boolean } | undefined)[] = new Array(SLOTS.length);
  const add = (points: readonly CaptureToken[], reason: string, definite: boolean, only?: (p: CaptureToken) => boolean) => {
    for (const point of points) {
      if (only && !only(point)) continue;
      const i = slotOf(point);
      const e = acc[i];
      if (!e) acc[i] = { point, reasons: [reason], definite };
      else {
        if (!e.reasons.includes(reason)) e.reasons.push(reason);
        e.definite ||= definite;
      }
    }
  };
  add(c.defaults, "default", true);
  if (step.capture && step.capture.length > 0) add(capturePoints(step.capture), "per-action", true);
  for (let i = 0; i < c.rules.length; i++) {
    const rule = c.rules[i] as CompiledRule;
    if (rule.kind === "action") {
      if (fires(rule, i)) add(rule.points, rule.reason, true);
    } else if (phase === "before") {
      add(rule.points, rule.reason, false, needsSpeculation);
    } else if (fires(rule, i)) {
      add(rule.points, rule.reason, false);
    }
  }
  const out: AppliedCapture[] = [];
  for (const e of acc) {
    if (!e) continue;
    const { point, reasons, definite } = e;
    out.push({ token: point.token, kind: point.kind, when: point.when, reason: reasons[0] ?? "", reasons, speculative: !definite && needsSpeculation(point) });
  }
  return out;
}

/** The speculative points started before the step that its outcome does not keep: stop them and throw them away. */
export function discardedSpeculative(before: readonly AppliedCapture[], after: readonly AppliedCapture[]): AppliedCapture[] {
  const kept = new Set(after.map((a) => a.token));
  return before.filter((b) => b.speculative && !kept.has(b.token));
}
