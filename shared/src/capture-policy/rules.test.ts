import { describe, expect, it } from "vitest";
import { STEP_ACTIONS } from "./actions.js";
import type { SessionPolicy } from "./policy.js";
import { capturesFor, compilePolicy, discardedSpeculative, ruleFires, type AppliedCapture, type StepFacts } from "./rules.js";

const CHECKOUT = "com.example.app:id/checkout_button";
const policy: SessionPolicy = {
  capture: ["screenshot.before"],
  capturePolicy: [
    { on: { action: "tap", idMatches: "*:id/checkout*" }, capture: ["deviceLog", "elements.after"] },
    { on: { event: "screenChanged" }, capture: ["elements"] },
    { on: { result: "error" }, capture: ["deviceLog", "video"] },
    { on: { action: "type" }, capture: ["elements.before"] },
    { on: { action: "longPress" }, capture: ["video"] },
  ],
};

/** token <- reasons, speculative marked with "?". */
const brief = (caps: AppliedCapture[]) => caps.map((c) => `${c.token}<-${c.reasons.join("+")}${c.speculative ? "?" : ""}`);

/** Every combination of step facts farm can record. */
const allSteps: StepFacts[] = STEP_ACTIONS.flatMap((action) =>
  ["", CHECKOUT, "com.example.app:id/pay"].flatMap((targetId) => [false, true].flatMap((screenChanged) => [false, true].map((failed) => ({ action, targetId, screenChanged, failed }))))
);

describe("rule triggers", () => {
  const rules = compilePolicy(policy).rules;
  const firing = (i: number) => allSteps.filter((s) => ruleFires(rules[i]!, s));

  it("action + idMatches fires on that action with a matching id, nowhere else", () => {
    expect(firing(0).every((s) => s.action === "tap" && s.targetId === CHECKOUT)).toBe(true);
    expect(firing(0)).toHaveLength(4); // × screenChanged × failed
  });

  it("screenChanged fires on every step whose screen changed, whatever else", () => {
    expect(firing(1)).toEqual(allSteps.filter((s) => s.screenChanged));
  });

  it("result: error fires on every failed step, whatever else", () => {
    expect(firing(2)).toEqual(allSteps.filter((s) => s.failed));
  });

  it("`type` is the timeline's text; without idMatches any target, even none", () => {
    expect(firing(3)).toEqual(allSteps.filter((s) => s.action === "text"));
    expect(ruleFires(rules[3]!, { action: "type" })).toBe(true);
  });

  it("longPress never fires on a step farm records today", () => {
    expect(firing(4)).toEqual([]);
  });

  it("idMatches never matches a step without a target id", () => {
    const any = compilePolicy({ capturePolicy: [{ on: { action: "tap", idMatches: "*" }, capture: ["video"] }] }).rules[0]!;
    expect(ruleFires(any, { action: "tap", targetId: "" })).toBe(false);
    expect(ruleFires(any, { action: "tap" })).toBe(false);
    expect(ruleFires(any, { action: "tap", targetId: "x" })).toBe(true);
  });
});

describe("capturesFor", () => {
  it("applies the default to every step, with reason default", () => {
    for (const s of allSteps) expect(capturesFor({ capture: ["elements", "actionLog"] }, s, "after").map((c) => `${c.token}<-${c.reason}`)).toEqual(["elements.after<-default"]);
  });

  it("keeps only the baseline without a policy's lists: no captures at all", () => {
    expect(capturesFor({}, { action: "tap", failed: true, screenChanged: true }, "before")).toEqual([]);
    expect(capturesFor({}, { action: "tap", failed: true, screenChanged: true }, "after")).toEqual([]);
  });

  it("adds per-action tokens with reason per-action, merged with the rest", () => {
    const caps = capturesFor(policy, { action: "shell", capture: ["screenshot.before", "deviceLog"] }, "before");
    expect(brief(caps)).toEqual(["screenshot.before<-default+per-action", "video.around<-rule 3?", "deviceLog.around<-per-action+rule 3"]);
    expect(caps[0]?.reason).toBe("default");
    expect(brief(capturesFor(policy, { action: "shell", capture: ["deviceLog"] }, "after"))).toEqual(["screenshot.before<-default", "deviceLog.around<-per-action"]);
  });

  it("before an action: definite points whatever their when, and post-hoc rules' before/interval points speculatively", () => {
    expect(brief(capturesFor(policy, { action: "tap", targetId: CHECKOUT }, "before"))).toEqual([
      "screenshot.before<-default",
      "elements.after<-rule 1",
      "video.around<-rule 3?",
      "deviceLog.around<-rule 1+rule 3",
    ]);
    // screenChanged asks elements.after only: nothing to speculate; its facts are not read before the action.
    expect(brief(capturesFor(policy, { action: "swipe", screenChanged: true, failed: true }, "before"))).toEqual(["screenshot.before<-default", "video.around<-rule 3?", "deviceLog.around<-rule 3?"]);
  });

  it("after a step that neither failed nor changed the screen: speculative points are dropped", () => {
    const step = { action: "swipe", screenChanged: false, failed: false };
    const before = capturesFor(policy, step, "before");
    const after = capturesFor(policy, step, "after");
    expect(brief(after)).toEqual(["screenshot.before<-default"]);
    expect(discardedSpeculative(before, after).map((c) => c.token)).toEqual(["video.around", "deviceLog.around"]);
  });

  it("after a failed step: the safety net's speculative points are kept, still marked as speculated", () => {
    const step = { action: "swipe", failed: true };
    const after = capturesFor(policy, step, "after");
    expect(brief(after)).toEqual(["screenshot.before<-default", "video.around<-rule 3?", "deviceLog.around<-rule 3?"]);
    expect(discardedSpeculative(capturesFor(policy, step, "before"), after)).toEqual([]);
  });

  it("after a step that changed the screen: post-hoc after points are taken then, not speculated", () => {
    expect(brief(capturesFor(policy, { action: "key", screenChanged: true }, "after"))).toEqual(["screenshot.before<-default", "elements.after<-rule 2"]);
  });

  it("lists a point asked for by several sources once, definite when any definite source asks", () => {
    const after = capturesFor(policy, { action: "tap", targetId: CHECKOUT, screenChanged: true, failed: true }, "after");
    expect(brief(after)).toEqual(["screenshot.before<-default", "elements.after<-rule 1+rule 2", "video.around<-rule 3?", "deviceLog.around<-rule 1+rule 3"]);
  });

  it("splits an instant around into before and after; a post-hoc rule speculates only the before half", () => {
    const p: SessionPolicy = { capturePolicy: [{ on: { result: "error" }, capture: ["elements.around"] }] };
    expect(brief(capturesFor(p, { action: "tap" }, "before"))).toEqual(["elements.before<-rule 1?"]);
    expect(brief(capturesFor(p, { action: "tap", failed: true }, "after"))).toEqual(["elements.before<-rule 1?", "elements.after<-rule 1"]);
    expect(capturesFor(p, { action: "tap", failed: false }, "after")).toEqual([]);
  });

  it("reads the same from a compiled policy, compiled once per policy object", () => {
    expect(compilePolicy(policy)).toBe(compilePolicy(policy));
    const step = { action: "tap", targetId: CHECKOUT, failed: true };
    expect(capturesFor(compilePolicy(policy), step, "after")).toEqual(capturesFor(policy, step, "after"));
  });
});
