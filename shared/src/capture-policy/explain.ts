import { capturePoints, isHeavy, isInterval, type CaptureKind, type CaptureToken } from "./capture-token.js";
import type { SessionPolicy, Trigger } from "./policy.js";
import { collect, compilePolicy, discardedSpeculative, ruleFires, type CompiledRule } from "./rules.js";
import type { ScenarioStep } from "./steps.js";

/**
 * What a policy would capture over a scenario, without a phone: which steps
 * each rule fires on, what that costs, and what looks like a mistake.
 */

const KiB = 1024;
const MiB = 1024 * KiB;

/** Bytes stored per capture point, rough; documented in docs/session-policy.md. */
export const BYTE_ESTIMATES: Readonly<Record<CaptureKind, number>> = {
  screenshot: 150 * KiB,
  elements: 40 * KiB,
  video: 2 * MiB,
  deviceLog: 64 * KiB,
};

/** A rule firing on more than this share of the steps is broad. */
export const BROAD_FRACTION = 1 / 3;
/** Past this many steps, speculating heavy captures for a post-hoc rule is worth a warning. */
export const MANY_STEPS = 50;

export interface RuleExplanation {
  /** "default" or "rule N" (capturePolicy[N-1]). */
  rule: string;
  /** "every step", "action: tap, idMatches: \"*:id/checkout*\"", "event: screenChanged", "result: error". */
  trigger: string;
  /** Canonical tokens, defaults applied ("elements.after", "deviceLog.around"). */
  captures: string[];
  fires: number;
  /** Sequence numbers of the steps it fires on. */
  sequences: number[];
  /** Post-hoc rules with points that start before the outcome is known: started on every step. */
  speculative: boolean;
  /** Stored by this rule on the steps it fires on, alone (screenshots: 0, the baseline has them). */
  estimatedBytes: number;
}

export interface PolicyWarning {
  rule: string;
  kinds: CaptureKind[];
  message: string;
  estimatedBytes: number;
}

export interface PolicyNote {
  rule: string;
  message: string;
}

export interface KindTotal {
  kind: CaptureKind;
  /** Points stored over the scenario, one per step and point whatever asked for it. */
  captures: number;
  estimatedBytes: number;
  /** Speculative points started and then thrown away (cost on the phone, nothing stored). */
  speculativeDiscarded: number;
}

export interface PolicyExplanation {
  steps: number;
  rules: RuleExplanation[];
  warnings: PolicyWarning[];
  notes: PolicyNote[];
  totals: KindTotal[];
  estimatedBytes: number;
}

/** A byte count as people read it: 150 KiB, 8.3 MiB. */
export function formatBytes(n: number): string {
  if (n < KiB) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / KiB;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v >= 100 ? Math.round(v) : Number(v.toFixed(1))} ${units[i]}`;
}

/** How a trigger reads in tables and warnings. */
export function describeTrigger(t: Trigger | undefined): string {
  if (!t) return "every step";
  if ("action" in t) return `action: ${t.action}${t.idMatches !== undefined ? `, idMatches: ${JSON.stringify(t.idMatches)}` : ""}`;
  if ("event" in t) return `event: ${t.event}`;
  return `result: ${t.result}`;
}

/** Screenshots cost nothing beyond the baseline, which takes one before and one after every step. */
const extraBytes = (p: CaptureToken) => (p.kind === "screenshot" ? 0 : BYTE_ESTIMATES[p.kind]);
const heavyKinds = (points: readonly CaptureToken[]) => [...new Set(points.filter((p) => isHeavy(p.kind)).map((p) => p.kind))];
const ofSteps = (n: number, of: number) => (n === of ? `all ${of} steps` : `${n} of ${of} steps`);

/** Explains `policy` over `steps` (in timeline order). Pure: reads no environment, no files. */
export function explainPolicy(policy: SessionPolicy, steps: readonly ScenarioStep[]): PolicyExplanation {
  const c = compilePolicy(policy);
  const n = steps.length;
  const rows: RuleExplanation[] = [];
  const warnings: PolicyWarning[] = [];
  const notes: PolicyNote[] = [];

  const explainRow = (rule: string, trigger: Trigger | undefined, tokens: readonly string[], points: readonly CaptureToken[], sequences: number[], compiled?: CompiledRule) => {
    const fires = sequences.length;
    const bytesEach = points.reduce((sum, p) => sum + extraBytes(p), 0);
    const postHoc = compiled !== undefined && compiled.kind !== "action";
    const speculative = postHoc && points.some((p) => p.when === "before" || isInterval(p.kind));
    rows.push({ rule, trigger: describeTrigger(trigger), captures: canonical(tokens), fires, sequences, speculative, estimatedBytes: fires * bytesEach });

    const heavy = heavyKinds(points);
    const heavyBytes = fires * points.filter((p) => isHeavy(p.kind)).reduce((s, p) => s + extraBytes(p), 0);
    const label = `${rule} (${describeTrigger(trigger)})`;
    const broad = compiled?.kind !== "error" && n > 0 && fires > n * BROAD_FRACTION;
    if (heavy.length > 0 && broad) {
      warnings.push({ rule, kinds: heavy, estimatedBytes: heavyBytes, message: `${label} captures ${heavy.join(" and ")} on ${ofSteps(fires, n)} (more than a third): ≈ ${formatBytes(heavyBytes)}` });
    } else if (heavy.length > 0 && postHoc && n > MANY_STEPS) {
      warnings.push({
        rule,
        kinds: heavy,
        estimatedBytes: heavyBytes,
        message: `${label} must start ${heavy.join(" and ")} speculatively around all ${n} steps (more than ${MANY_STEPS}) to keep ${fires === 1 ? "the 1" : `the ${fires}`} it fires on: ≈ ${formatBytes(heavyBytes)} kept`,
      });
    }
    if (compiled && "action" in compiled.trigger && compiled.trigger.action === "longPress") {
      notes.push({ rule, message: `${label}: farm has no long-press action yet; this rule never fires on a recorded session` });
    } else if (compiled && fires === 0 && n > 0) {
      notes.push({ rule, message: `${label} fires on none of the ${n} steps` });
    }
  };

  // One pass: each rule's trigger evaluated once per step, for its row and for the step's totals.
  const sequences: number[][] = c.rules.map(() => []);
  const counts = new Map<CaptureKind, { captures: number; discarded: number }>();
  const bump = (kind: CaptureKind, field: "captures" | "discarded", by = 1) => {
    const e = counts.get(kind) ?? { captures: 0, discarded: 0 };
    e[field] += by;
    counts.set(kind, e);
  };
  bump("screenshot", "captures", 2 * n);
  const fired: boolean[] = new Array(c.rules.length).fill(false);
  const firedAt = (_: CompiledRule, i: number) => fired[i] === true;
  for (const s of steps) {
    for (let i = 0; i < c.rules.length; i++) {
      fired[i] = ruleFires(c.rules[i] as CompiledRule, s);
      if (fired[i]) sequences[i]?.push(s.sequence);
    }
    // Totals: each step's kept points once, whatever asked for them; screenshots are the baseline's.
    const before = collect(c, s, "before", firedAt);
    const after = collect(c, s, "after", firedAt);
    for (const a of after) if (a.kind !== "screenshot") bump(a.kind, "captures");
    for (const d of discardedSpeculative(before, after)) bump(d.kind, "discarded");
  }

  if (policy.capture !== undefined) {
    explainRow("default", undefined, policy.capture, c.defaults, steps.map((s) => s.sequence));
  }
  for (const [i, rule] of c.rules.entries()) {
    explainRow(rule.reason, rule.trigger, policy.capturePolicy?.[i]?.capture ?? [], rule.points, sequences[i] ?? [], rule);
  }

  const order: CaptureKind[] = ["screenshot", "elements", "video", "deviceLog"];
  const totals = order
    .filter((k) => counts.has(k))
    .map((kind) => {
      const e = counts.get(kind) ?? { captures: 0, discarded: 0 };
      return { kind, captures: e.captures, estimatedBytes: e.captures * BYTE_ESTIMATES[kind], speculativeDiscarded: e.discarded };
    });
  return { steps: n, rules: rows, warnings, notes, totals, estimatedBytes: totals.reduce((s, t) => s + t.estimatedBytes, 0) };
}

/** Tokens with their defaults applied, as written otherwise ("elements" -> "elements.after"; "actionLog" kept). */
function canonical(tokens: readonly string[]): string[] {
  const out: string[] = [];
  for (const t of tokens) {
    const [kind] = t.split(".");
    const points = capturePoints([t]);
    const word = points.length === 0 ? t : points.length === 2 ? `${kind}.around` : (points[0]?.token ?? t);
    if (!out.includes(word)) out.push(word);
  }
  return out;
}

/** "1-3,7,9" from sorted sequence numbers; at most `max` runs, then "… (+N)". */
export function compactSequences(seqs: readonly number[], max = 12): string {
  if (seqs.length === 0) return "–";
  const runs: string[] = [];
  let start = seqs[0] ?? 0;
  let prev = start;
  let shown = 0;
  const flush = () => {
    runs.push(start === prev ? String(start) : prev === start + 1 ? `${start},${prev}` : `${start}-${prev}`);
    shown += prev - start + 1;
  };
  for (const s of seqs.slice(1)) {
    if (s === prev + 1) {
      prev = s;
      continue;
    }
    flush();
    start = prev = s;
    if (runs.length >= max) break;
  }
  if (runs.length < max) flush();
  const rest = seqs.length - shown;
  return rest > 0 ? `${runs.join(",")},… (+${rest})` : runs.join(",");
}
