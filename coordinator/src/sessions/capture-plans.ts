import type { JsonObject } from "@bufbuild/protobuf";
import { compilePolicy, capturesFor, type CompiledPolicy, type StepFacts } from "@farm/shared/capture-policy/rules";
import { withSiteDefault, type SessionPolicy } from "@farm/shared/capture-policy/policy";
import type { SessionRow } from "./session-store.js";

/** What a step asks of the agent beyond its baseline screenshots, and why. */
export interface CapturePlan {
  /** Every capture point the agent is asked for (post-hoc rules' ones speculatively). */
  tokens: string[];
  /** Of those, the ones known to be kept before the action (not speculative). */
  definite: string[];
  facts: StepFacts;
  policy: CompiledPolicy;
}

/** A capture a step keeps: which source asked first, and whether it was taken speculatively. */
export interface KeptCapture {
  reason: string;
  speculative: boolean;
}

/** The header carrying `--capture` tokens of one action. */
export const CAPTURE_HEADER = "x-farm-capture";

/**
 * A session's capture policy applied to its steps. The policy's post-hoc
 * rules (screenChanged, result: error) are decided only once the step has
 * settled, so everything they could keep is asked for up front and what
 * they do not keep is dropped (see docs/session-policy.md).
 */
export class CapturePlans {
  private readonly compiled = new Map<string, { json: string; policy: CompiledPolicy; raw: SessionPolicy }>();

  constructor(
    private readonly siteDefault: readonly string[] | undefined = undefined,
    /** The site's redaction rules, merged with each policy's. */
    readonly siteRedact: { labels?: string[]; fields?: string[]; headers?: string[]; unmaskHeaders?: string[] } = {},
  ) {}

  /** The session's policy (with the site default where it sets no `capture`). */
  policyOf(session: SessionRow): { raw: SessionPolicy; compiled: CompiledPolicy } {
    const known = this.compiled.get(session.sessionId);
    if (known && known.json === session.policyJson) return { raw: known.raw, compiled: known.policy };
    const raw = withSiteDefault(session.policyJson ? (JSON.parse(session.policyJson) as SessionPolicy) : {}, this.siteDefault);
    const policy = compilePolicy(raw);
    this.compiled.set(session.sessionId, { json: session.policyJson, policy, raw });
    return { raw, compiled: policy };
  }

  forget(sessionId: string): void {
    this.compiled.delete(sessionId);
  }

  /** The captures to ask the agent for, for a step of this kind on this target. */
  plan(session: SessionRow, action: string, targetId: string, perAction: readonly string[], targetKnown = true): CapturePlan {
    const { compiled } = this.policyOf(session);
    const facts: StepFacts = { action, targetId, capture: perAction };
    const tokens = new Set<string>();
    const definite: string[] = [];
    for (const c of capturesFor(compiled, facts, "before")) {
      tokens.add(c.token);
      if (!c.speculative) definite.push(c.token);
    }
    // A tap by text or description learns its element's id only when it runs: an id rule for it is speculative too.
    if (!targetKnown) { for (const r of compiled.rules) if (r.kind === "action" && r.matchId && r.stepAction === action) { for (const p of r.points) tokens.add(p.token); } }
    // Whatever a post-hoc rule could keep after the step is taken by the agent now: it cannot be taken later.
    for (const c of capturesFor(compiled, { ...facts, screenChanged: true, failed: true }, "after")) tokens.add(c.token);
    return { tokens: [...tokens], definite, facts, policy: compiled };
  }

  /**
   * Of what was asked, what the step keeps once its outcome is known, with
   * the first reason for each, and whether it was speculative: asked for
   * before the outcome that keeps it was known. In farm that is every
   * capture kept only by a post-hoc rule (or an id rule on a tap whose id
   * was learnt when it ran), `.after` ones too: the agent took them all
   * inside the routed call, before the coordinator saw the outcome.
   */
  keep(plan: CapturePlan, outcome: { screenChanged: boolean; failed: boolean }): Map<string, KeptCapture> {
    const kept = new Map<string, KeptCapture>();
    const definite = new Set(plan.definite);
    for (const c of capturesFor(plan.policy, { ...plan.facts, ...outcome }, "after")) kept.set(c.token, { reason: c.reason, speculative: !definite.has(c.token) });
    return kept;
  }
}

/** The primary target id of a step: its selector's resource id, else the resolved element's. */
export function targetIdOf(request: JsonObject, response: JsonObject | undefined): string {
  const tap = request["tap"] as JsonObject | undefined;
  const selected = (tap?.["element"] as JsonObject | undefined)?.["resourceId"];
  if (typeof selected === "string" && selected) return selected;
  const resolved = ((response?.["element"] as JsonObject | undefined)?.["element"] as JsonObject | undefined)?.["resourceId"];
  return typeof resolved === "string" ? resolved : "";
}
