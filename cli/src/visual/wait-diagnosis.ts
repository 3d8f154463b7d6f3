import { describeElement, isTappable } from "@farm/agent/ui/element-selector";
import { walkElements, type UiElementInit } from "@farm/agent/ui/ui-tree";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";

/**
 * `farm wait`'s matching and its record of what it saw: the polls, and on
 * a timeout the diagnosis (wait-timeout.json). Pure, so it is unit-tested
 * without a device.
 */

export type SelectorBy = "resourceId" | "text" | "contentDesc";

export interface WaitSelector {
  by: SelectorBy;
  value: string;
}

/** The flag that sets each selector field, and how messages name it. */
export const SELECTOR_FLAG: Readonly<Record<SelectorBy, string>> = { resourceId: "id", text: "text", contentDesc: "desc" };
const NOUN: Readonly<Record<SelectorBy, string>> = { resourceId: "resource id", text: "text", contentDesc: "content description" };

/** `text "Sign in"` */
export function selectorText(s: WaitSelector): string {
  return `${NOUN[s.by]} ${JSON.stringify(s.value)}`;
}

/** The selector as the step's arguments and the diagnosis show it: `{ text: "Sign in" }`. */
export function selectorJson(s: WaitSelector): Record<string, string> {
  return { [s.by]: s.value };
}

/** A proto element as plain data (bounds always present), the shape the agent's helpers take. */
export function plainElement(e: UiElement): UiElementInit {
  const b = e.bounds;
  return {
    type: e.type,
    text: e.text,
    resourceId: e.resourceId,
    contentDesc: e.contentDesc,
    bounds: { left: b?.left ?? 0, top: b?.top ?? 0, right: b?.right ?? 0, bottom: b?.bottom ?? 0 },
    enabled: e.enabled,
    clickable: e.clickable,
    focused: e.focused,
    ...(e.confidence !== undefined ? { confidence: e.confidence } : {}),
    packageName: e.packageName,
    children: e.children.map(plainElement),
  };
}

/**
 * The elements the selector names, as `farm input tap` counts them: the
 * field equal to the value (whole, case and spaces included), and the
 * element on the screen (an area, its centre inside its window).
 */
export function matchingElements(roots: readonly UiElementInit[], s: WaitSelector): UiElementInit[] {
  const out: UiElementInit[] = [];
  for (const { element, root } of walkElements(roots)) {
    if (element[s.by] === s.value && isTappable(element.bounds, root.bounds)) out.push(element);
  }
  return out;
}

/** One element of the flattened list: what a selector can name, and where it is. */
export interface FlatElement {
  type: string;
  text: string;
  resourceId: string;
  contentDesc: string;
  bounds: { left: number; top: number; right: number; bottom: number };
}

export function flatten(roots: readonly UiElementInit[]): FlatElement[] {
  const out: FlatElement[] = [];
  const visit = (e: UiElementInit) => {
    out.push({ type: e.type, text: e.text, resourceId: e.resourceId, contentDesc: e.contentDesc, bounds: { ...e.bounds } });
    for (const c of e.children) visit(c);
  };
  for (const r of roots) visit(r);
  return out;
}

/** One poll: when it started (ms after the wait began), how long it took, and what it read or why it failed. */
export type PollEntry =
  | { poll: number; atMs: number; tookMs: number; nodeCount: number; matches: number }
  | { poll: number; atMs: number; tookMs: number; errorCode: string; errorMessage: string };

/**
 * The polls of a wait. A long wait keeps the first and the last
 * `keep / 2` entries and counts the ones in between.
 */
export class PollTrace {
  readonly head: PollEntry[] = [];
  private tail: PollEntry[] = [];
  omitted = 0;
  polls = 0;
  firstNonEmptyAtMs: number | null = null;
  /** The last tree read, and when its poll started. */
  lastTree: { atMs: number; source: string; nodeCount: number; roots: UiElementInit[] } | undefined;

  constructor(private readonly keep = 1000) {}

  add(entry: PollEntry): void {
    this.polls++;
    if ("nodeCount" in entry && entry.nodeCount > 0 && this.firstNonEmptyAtMs === null) this.firstNonEmptyAtMs = entry.atMs;
    const half = Math.max(1, Math.floor(this.keep / 2));
    if (this.head.length < half) {
      this.head.push(entry);
      return;
    }
    this.tail.push(entry);
    if (this.tail.length > half) {
      this.tail.shift();
      this.omitted++;
    }
  }

  entries(): PollEntry[] {
    return [...this.head, ...this.tail];
  }

  failedPolls(): number {
    return this.entries().filter((e) => "errorCode" in e).length;
  }
}

export interface WaitSettings {
  selector: WaitSelector;
  gone: boolean;
  timeoutMs: number;
  intervalMs: number;
  appPackage: string;
}

export interface Provenance {
  farmVersion: string;
  sessionId: string;
  policySha256: string;
}

/**
 * wait-timeout.json: why a wait ended without its element. Diagnosis only:
 * the result stays what it was (COMMAND_TIMEOUT, or a poll's error).
 */
export function waitDiagnosis(w: WaitSettings, trace: PollTrace, result: { code: string; message: string; waitedMs: number }, provenance: Provenance): Record<string, unknown> {
  const last = trace.lastTree;
  return {
    kind: "farm-wait-diagnosis",
    version: 1,
    result: { code: result.code, message: result.message },
    selector: selectorJson(w.selector),
    gone: w.gone,
    timeoutMs: w.timeoutMs,
    intervalMs: w.intervalMs,
    appPackage: w.appPackage,
    waitedMs: Math.round(result.waitedMs),
    polls: trace.polls,
    failedPolls: trace.failedPolls(),
    omittedPolls: trace.omitted,
    trace: trace.entries(),
    firstNonEmptyAtMs: trace.firstNonEmptyAtMs,
    // The screen at the end: the last tree a poll read (its poll's start in treeAtMs).
    treeAtMs: last?.atMs ?? null,
    source: last?.source ?? null,
    elements: last ? flatten(last.roots) : [],
    matching: last ? flatten(matchingElements(last.roots, w.selector).map((e) => ({ ...e, children: [] }))) : [],
    tree: last ? last.roots : null,
    provenance,
  };
}

const SUMMARY_ELEMENTS = 15;

/** The diagnosis in a few lines for stderr. */
export function diagnosisSummary(w: WaitSettings, trace: PollTrace, result: { code: string; message: string; waitedMs: number }): string {
  const failed = trace.entries().filter((e): e is Extract<PollEntry, { errorCode: string }> => "errorCode" in e);
  const byCode = new Map<string, number>();
  for (const f of failed) byCode.set(f.errorCode, (byCode.get(f.errorCode) ?? 0) + 1);
  const lines = [
    `farm wait: ${result.message}`,
    `  ${trace.polls} poll${trace.polls === 1 ? "" : "s"} in ${Math.round(result.waitedMs)} ms${failed.length > 0 ? `, ${failed.length} failed (${[...byCode].map(([c, n]) => `${c} x${n}`).join(", ")})` : ""}; ` +
    (trace.firstNonEmptyAtMs === null ? "the tree never had elements" : `the tree first had elements at ${trace.firstNonEmptyAtMs} ms`),
  ];
  const last = trace.lastTree;
  if (!last) {
    lines.push("  no poll read the screen");
    return lines.join("\n");
  }
  const all: UiElementInit[] = [];
  for (const { element } of walkElements(last.roots)) all.push(element);
  const named = all.filter((e) => e.text || e.resourceId || e.contentDesc);
  lines.push(`  the screen at ${last.atMs} ms (${last.source}): ${all.length} element${all.length === 1 ? "" : "s"}${named.length > 0 ? ", these named:" : ""}`);
  for (const e of named.slice(0, SUMMARY_ELEMENTS)) lines.push(`    ${describeElement(e)}`);
  if (named.length > SUMMARY_ELEMENTS) lines.push(`    and ${named.length - SUMMARY_ELEMENTS} more`);
  if (w.gone) {
    const still = matchingElements(last.roots, w.selector);
    lines.push(`  still there: ${still.map((e) => describeElement(e)).join("; ") || "(none)"}`);
  }
  return lines.join("\n");
}
