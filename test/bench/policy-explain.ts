/**
 * Cost of `farm session explain`'s work: explainPolicy over a generated
 * 10,000-step scenario with 20 rules (action rules with idMatches globs,
 * screenChanged, result: error; heavy and light kinds), median of a few
 * runs, against a plain loop that evaluates the same 20 triggers with string
 * compares (ratio). Also what reading the inputs costs: the steps file as
 * YAML and as JSON (parse + schema) and the policy (parse + schema
 * compile). Prints; asserts nothing.
 *
 *   node test/dist/bench/policy-explain.js [--steps 10000] [--runs 7]
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { explainPolicy } from "@farm/shared/capture-policy/explain";
import { parsePolicy, type SessionPolicy } from "@farm/shared/capture-policy/policy";
import { parseSteps, type ScenarioStep } from "@farm/shared/capture-policy/steps";
import { emitReport } from "./bench-report.js";
import { median } from "./proc-stats.js";

const { values } = parseArgs({ options: { steps: { type: "string", default: "10000" }, runs: { type: "string", default: "7" } } });
const STEPS = Number(values.steps);
const RUNS = Number(values.runs);

const SCREENS = ["login", "home", "search", "product", "cart", "checkout", "payment", "confirm", "profile", "settings"];
const ACTIONS = ["tap", "tap", "tap", "text", "swipe", "key", "shell", "ui-tree"];

/** A deterministic scenario: mostly taps on ids of ten screens, some failures and screen changes. */
function scenario(n: number): ScenarioStep[] {
  let seed = 42;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  return Array.from({ length: n }, (_, i) => {
    const action = ACTIONS[Math.floor(rnd() * ACTIONS.length)] ?? "tap";
    const screen = SCREENS[Math.floor(rnd() * SCREENS.length)] ?? "home";
    const targetId = action === "tap" || action === "text" ? (rnd() < 0.9 ? `com.example.app:id/${screen}_${Math.floor(rnd() * 8)}` : "") : "";
    return { sequence: i + 1, action, targetId, screenChanged: rnd() < 0.4, failed: rnd() < 0.02 };
  });
}

/** 20 rules: one per screen on taps (glob), typing on two screens, each other action, and the two post-hoc triggers. */
function policyText(): string {
  const rules = [
    ...SCREENS.map((s, i) => `  - on: {action: tap, idMatches: "*:id/${s}_*"}\n    capture: [${i % 3 === 0 ? "deviceLog" : "elements.after"}]`),
    `  - on: {action: type, idMatches: "*:id/{login,payment}_*"}\n    capture: [elements.before]`,
    `  - on: {action: type, idMatches: "*:id/search_?"}\n    capture: [elements]`,
    ...["swipe", "key", "shell", "install", "setprop", "reboot"].map((a) => `  - on: {action: ${a}}\n    capture: [elements.around]`),
    `  - on: {event: screenChanged}\n    capture: [elements]`,
    `  - on: {result: error}\n    capture: [deviceLog, video]`,
  ];
  return `capture: [screenshot.before]\ncapturePolicy:\n${rules.join("\n")}\n`;
}

/** The floor: the same 20 triggers as plain string compares, counting firings. */
function plainLoop(steps: readonly ScenarioStep[]): number {
  let fired = 0;
  for (const s of steps) {
    for (const screen of SCREENS) if (s.action === "tap" && s.targetId.includes(`:id/${screen}_`)) fired++;
    if (s.action === "text" && (s.targetId.includes(":id/login_") || s.targetId.includes(":id/payment_"))) fired++;
    if (s.action === "text" && s.targetId.includes(":id/search_")) fired++;
    for (const a of ["swipe", "key", "shell", "install", "setprop", "reboot"]) if (s.action === a) fired++;
    if (s.screenChanged) fired++;
    if (s.failed) fired++;
  }
  return fired;
}

function time<T>(fn: () => T): { ms: number; value: T } {
  const t0 = performance.now();
  const value = fn();
  return { ms: performance.now() - t0, value };
}

function main(): void {
  const text = policyText();
  const first = time(() => parsePolicy(text, "yaml"));
  const policy: SessionPolicy = first.value;
  const again = time(() => parsePolicy(text, "yaml"));
  const steps = scenario(STEPS);
  const yaml = steps.map((s) => `- {action: ${s.action}${s.targetId ? `, id: "${s.targetId}"` : ""}${s.screenChanged ? ", screenChanged: true" : ""}${s.failed ? ", failed: true" : ""}}`).join("\n");
  const readSteps = time(() => parseSteps(yaml, "yaml"));
  const json = JSON.stringify(steps.map((s) => ({ action: s.action, ...(s.targetId ? { id: s.targetId } : {}), ...(s.screenChanged ? { screenChanged: true } : {}), ...(s.failed ? { failed: true } : {}) })));
  const readJson = time(() => parseSteps(json, "json"));

  const explainMs: number[] = [];
  const loopMs: number[] = [];
  let firings = 0;
  let loopFirings = 0;
  let warnings = 0;
  for (let i = 0; i < RUNS + 1; i++) {
    // A fresh policy object each run: globs are compiled (and cached) per object.
    const p = structuredClone(policy);
    const e = time(() => explainPolicy(p, steps));
    const l = time(() => plainLoop(steps));
    if (i === 0) continue; // warm-up
    explainMs.push(e.ms);
    loopMs.push(l.ms);
    firings = e.value.rules.filter((r) => r.rule !== "default").reduce((s, r) => s + r.fires, 0);
    warnings = e.value.warnings.length;
    loopFirings = l.value;
  }
  const explain = median(explainMs);
  const loop = median(loopMs);
  const report = {
    steps: STEPS,
    rules: policy.capturePolicy?.length ?? 0,
    runs: RUNS,
    explainMedianMs: Number(explain.toFixed(1)),
    plainLoopMedianMs: Number(loop.toFixed(2)),
    ratioVsPlainLoop: Number((explain / loop).toFixed(0)),
    perStepUs: Number(((explain * 1000) / STEPS).toFixed(2)),
    firings,
    firingsAgree: firings === loopFirings,
    warnings,
    policyParseFirstMs: Number(first.ms.toFixed(1)),
    policyParseMs: Number(again.ms.toFixed(2)),
    stepsYamlBytes: Buffer.byteLength(yaml),
    stepsParseMs: Number(readSteps.ms.toFixed(0)),
    stepsJsonParseMs: Number(readJson.ms.toFixed(1)),
  };
  console.log(`explainPolicy over ${STEPS} generated steps with ${report.rules} rules, median of ${RUNS} runs after a warm-up:`);
  console.log(`  explain                    ${explain.toFixed(1)} ms (${report.perStepUs} µs/step; ${firings} firings, ${warnings} warnings)`);
  console.log(`  plain loop, same triggers  ${loop.toFixed(2)} ms   ratio ${report.ratioVsPlainLoop}x   (firings agree: ${report.firingsAgree})`);
  console.log(`  policy parse + validate    ${first.ms.toFixed(1)} ms first (schema compile), ${again.ms.toFixed(2)} ms after`);
  console.log(`  steps file, YAML ${(report.stepsYamlBytes / 1024).toFixed(0)} KiB   parse + validate ${readSteps.ms.toFixed(0)} ms (the same as JSON: ${readJson.ms.toFixed(1)} ms)`);
  emitReport("policy-explain", [{ measure: `explainPolicy, ${STEPS} steps`, instant: `${explain.toFixed(1)} ms (${report.ratioVsPlainLoop}x a plain loop)`, realistic: null, target: "", pass: null }], report);
}

main();
