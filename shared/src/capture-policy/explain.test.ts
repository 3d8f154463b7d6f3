import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BYTE_ESTIMATES, compactSequences, explainPolicy, formatBytes } from "./explain.js";
import { parsePolicy, type SessionPolicy } from "./policy.js";
import { parseSteps, type ScenarioStep } from "./steps.js";

const fixtures = fileURLToPath(new URL("../../../test/fixtures/session-policy/", import.meta.url));
const KiB = 1024;
const MiB = 1024 * KiB;

const step = (sequence: number, over: Partial<ScenarioStep> = {}): ScenarioStep => ({ sequence, action: "tap", targetId: "", screenChanged: false, failed: false, ...over });
const steps = (n: number, f: (i: number) => Partial<ScenarioStep> = () => ({})) => Array.from({ length: n }, (_, i) => step(i + 1, f(i + 1)));

describe("explainPolicy on the checkout fixture", () => {
  const policy = parsePolicy(readFileSync(fixtures + "checkout.policy.yaml", "utf8"), "yaml");
  const scenario = parseSteps(readFileSync(fixtures + "checkout.steps.yaml", "utf8"), "yaml");
  const e = explainPolicy(policy, scenario);
  const row = (rule: string) => e.rules.find((r) => r.rule === rule);

  it("counts where each rule fires", () => {
    expect(e.steps).toBe(60);
    expect(e.rules.map((r) => [r.rule, r.fires])).toEqual([["default", 60], ["rule 1", 24], ["rule 2", 40], ["rule 3", 3], ["rule 4", 6], ["rule 5", 6], ["rule 6", 0]]);
    expect(row("rule 3")?.sequences).toEqual([18, 38, 59]);
    expect(row("rule 4")?.sequences).toEqual([4, 14, 24, 34, 44, 54]);
    expect(row("rule 1")?.sequences.slice(0, 4)).toEqual([3, 5, 7, 8]);
  });

  it("describes triggers and captures with defaults applied", () => {
    expect(row("rule 1")).toMatchObject({ trigger: "action: tap, idMatches: \"*:id/checkout*\"", captures: ["deviceLog.around", "elements.after"], speculative: false });
    expect(row("rule 2")).toMatchObject({ trigger: "event: screenChanged", captures: ["elements.after"], speculative: false });
    expect(row("rule 3")).toMatchObject({ trigger: "result: error", captures: ["deviceLog.around", "video.around"], speculative: true });
    expect(row("default")).toMatchObject({ trigger: "every step", captures: ["screenshot.before"], estimatedBytes: 0 });
  });

  it("warns about the broad glob and the speculative safety net, and notes the long press", () => {
    expect(e.warnings.map((w) => [w.rule, w.kinds, w.estimatedBytes])).toEqual([
      ["rule 1", ["deviceLog"], 24 * 64 * KiB],
      ["rule 3", ["deviceLog", "video"], 3 * (64 * KiB + 2 * MiB)],
    ]);
    expect(e.warnings[0]?.message).toBe("rule 1 (action: tap, idMatches: \"*:id/checkout*\") captures deviceLog on 24 of 60 steps (more than a third): ≈ 1.5 MiB");
    expect(e.warnings[1]?.message).toContain("speculatively around all 60 steps (more than 50) to keep the 3 it fires on");
    expect(e.notes.map((n) => n.rule)).toEqual(["rule 6"]);
    expect(e.notes[0]?.message).toContain("no long-press action");
  });

  it("totals each step's points once, plus the baseline screenshots, and counts discarded speculation", () => {
    expect(e.totals).toEqual([
      { kind: "screenshot", captures: 120, estimatedBytes: 120 * 150 * KiB, speculativeDiscarded: 0 },
      // elements.after on 40 changed screens + 2 failed checkout taps; elements.before on 6 address inputs.
      { kind: "elements", captures: 48, estimatedBytes: 48 * 40 * KiB, speculativeDiscarded: 0 },
      // 6 swipes + 3 failures; speculated on the 51 others.
      { kind: "video", captures: 9, estimatedBytes: 9 * 2 * MiB, speculativeDiscarded: 51 },
      // 24 checkout taps + the failed ui-tree (the two failed taps are checkout taps).
      { kind: "deviceLog", captures: 25, estimatedBytes: 25 * 64 * KiB, speculativeDiscarded: 35 },
    ]);
    expect(e.estimatedBytes).toBe(e.totals.reduce((s, t) => s + t.estimatedBytes, 0));
  });
});

describe("explainPolicy warnings", () => {
  const heavyOn = (on: NonNullable<SessionPolicy["capturePolicy"]>[number]["on"]): SessionPolicy => ({ capturePolicy: [{ on, capture: ["deviceLog"] }] });

  it("calls a rule broad past a third of the steps, not at it", () => {
    const p = heavyOn({ action: "tap", idMatches: "*:id/a*" });
    const s = (k: number) => steps(30, (i) => ({ targetId: i <= k ? "x:id/a1" : "x:id/b" }));
    expect(explainPolicy(p, s(10)).warnings).toEqual([]);
    expect(explainPolicy(p, s(11)).warnings.map((w) => w.rule)).toEqual(["rule 1"]);
  });

  it("warns about heavy defaults and broad screenChanged rules; light kinds never warn", () => {
    expect(explainPolicy({ capture: ["video"] }, steps(3)).warnings[0]?.message).toBe("default (every step) captures video on all 3 steps (more than a third): ≈ 6 MiB");
    expect(explainPolicy(heavyOn({ event: "screenChanged" }), steps(9, (i) => ({ screenChanged: i <= 4 }))).warnings[0]?.message).toContain("on 4 of 9 steps");
    expect(explainPolicy({ capture: ["elements.around", "screenshot"], capturePolicy: [{ on: { action: "tap" }, capture: ["elements"] }] }, steps(100)).warnings).toEqual([]);
  });

  it("warns about heavy captures on result: error only past 50 steps", () => {
    const p = heavyOn({ result: "error" });
    expect(explainPolicy(p, steps(50, (i) => ({ failed: i === 1 }))).warnings).toEqual([]);
    const w = explainPolicy(p, steps(51, (i) => ({ failed: i === 1 }))).warnings;
    expect(w.map((x) => [x.rule, x.estimatedBytes])).toEqual([["rule 1", BYTE_ESTIMATES.deviceLog]]);
    expect(w[0]?.message).toContain("to keep the 1 it fires on: ≈ 64 KiB kept");
    // Speculating an .after capture is not needed: no warning.
    expect(explainPolicy({ capturePolicy: [{ on: { result: "error" }, capture: ["elements"] }] }, steps(200)).warnings).toEqual([]);
  });

  it("notes rules that fire nowhere; an empty scenario explains to zeros", () => {
    expect(explainPolicy(heavyOn({ action: "reboot" }), steps(5)).notes[0]?.message).toBe("rule 1 (action: reboot) fires on none of the 5 steps");
    const empty = explainPolicy(heavyOn({ action: "reboot" }), []);
    expect(empty).toMatchObject({ steps: 0, warnings: [], notes: [], estimatedBytes: 0 });
    expect(explainPolicy({}, steps(2)).rules).toEqual([]);
  });
});

describe("formatting", () => {
  it("compacts sequence numbers into runs", () => {
    expect(compactSequences([])).toBe("–");
    expect(compactSequences([1, 2, 3, 5, 7, 8])).toBe("1-3,5,7,8");
    expect(compactSequences(Array.from({ length: 30 }, (_, i) => i * 2 + 1), 3)).toBe("1,3,5,… (+27)");
  });

  it("prints bytes in binary units", () => {
    expect([formatBytes(0), formatBytes(1023), formatBytes(150 * KiB), formatBytes(1.5 * MiB), formatBytes(300 * MiB), formatBytes(3 * 1024 * MiB)]).toEqual(["0 B", "1023 B", "150 KiB", "1.5 MiB", "300 MiB", "3 GiB"]);
  });
});
