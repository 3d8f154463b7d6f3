import { Errors, farmError, NOT_DISPATCHED } from "@farm/shared/errors";
import type { ElementSelector } from "@farm/shared/gen/farm/v1/ui_pb";
import type { Redactor } from "@farm/shared/redaction/redactor";
import { walkElements, type UiElementInit, type UiRect } from "./ui-tree.js";

/** What a selector resolved to: the element (without its children) and the point a tap lands on. */
export interface ResolvedTarget {
  element: UiElementInit;
  x: number;
  y: number;
}

/** How many candidates an ELEMENT_AMBIGUOUS or ELEMENT_NOT_FOUND message lists. */
export const CANDIDATES_SHOWN = 5;

type By = "resourceId" | "text" | "contentDesc";

const FIELD: Record<By, string> = { resourceId: "resource_id", text: "text", contentDesc: "content_desc" };
const NOUN: Record<By, string> = { resourceId: "resource id", text: "text", contentDesc: "content description" };

/** The selector's one field, checked: set, and not empty (an empty value would select every element without one). */
export function selectorField(selector: ElementSelector | undefined, fieldPrefix: string): { by: By; value: string; field: string } {
  const c = selector?.by;
  if (!c || c.case === undefined) throw farmError(Errors.INVALID_ARGUMENT, "the element selector needs one of resource_id, text or content_desc", fieldPrefix, NOT_DISPATCHED);
  const field = `${fieldPrefix}.${FIELD[c.case]}`;
  if (c.value === "") throw farmError(Errors.INVALID_ARGUMENT, `the element's ${NOUN[c.case]} must not be empty`, field, NOT_DISPATCHED);
  if (c.value.length > 1000) throw farmError(Errors.INVALID_ARGUMENT, `the element's ${NOUN[c.case]} is at most 1000 characters`, field, NOT_DISPATCHED);
  return { by: c.case, value: c.value, field };
}

/** What a selector says, as messages name it: `text "Next"`. */
export function describeSelector(selector: ElementSelector | undefined): string {
  const c = selector?.by;
  return c && c.case !== undefined ? `${NOUN[c.case]} ${JSON.stringify(c.value)}` : "no selector";
}

/**
 * The one element of the trees the selector names, and the centre of its
 * bounds (integer pixels, inside the rectangle).
 *
 * Matching: the whole tree is walked, every window; resource id, text and
 * content description match exactly (case and whitespace included, the
 * whole value, never a substring). Disabled elements match like any other
 * (the tree is what the screen shows; the result says enabled=false).
 *
 * Only tappable elements count: an element with no area (zero width or
 * height) or whose centre lies outside its window (the root it belongs to:
 * scrolled off or laid out off-screen) is left out, so a hidden duplicate
 * never makes a visible element ambiguous. When only such elements match,
 * ELEMENT_NOT_FOUND says so and lists them.
 *
 * No match: ELEMENT_NOT_FOUND (with near misses: the same id under another
 * package prefix, the same text in another case). More than one:
 * ELEMENT_AMBIGUOUS listing up to five candidates. Both carry dispatched:
 * false: nothing reached the device.
 */
export function resolveElement(roots: readonly UiElementInit[], selector: ElementSelector | undefined, fieldPrefix = "tap.element", mask?: Redactor): ResolvedTarget {
  const { by, value, field } = selectorField(selector, fieldPrefix);
  // In a session step, messages are built from masked text: an element's text is cut below, and a cut leaves a secret's prefix.
  const what = `${NOUN[by]} ${JSON.stringify(mask ? mask.text(value) : value)}`;
  const tappable: UiElementInit[] = [];
  const hidden: UiElementInit[] = [];
  const near: UiElementInit[] = [];
  let total = 0;
  for (const { element, root } of walkElements(roots)) {
    total++;
    const v = element[by];
    if (v === value) (isTappable(element.bounds, root.bounds) ? tappable : hidden).push(element);
    else if (isNearMiss(by, v, value)) near.push(element);
  }
  if (tappable.length === 1) {
    const element = tappable[0] as UiElementInit;
    return { element: { ...element, children: [] }, ...centre(element.bounds) };
  }
  if (tappable.length > 1) {
    throw farmError(
      Errors.ELEMENT_AMBIGUOUS,
      `${tappable.length} elements on the screen have ${what}; name one with a more specific selector (--id, --text or --desc): ${candidates(tappable, mask)}`,
      field,
      NOT_DISPATCHED,
    );
  }
  if (hidden.length > 0) {
    throw farmError(
      Errors.ELEMENT_NOT_FOUND,
      `no tappable element has ${what}: ${hidden.length} ${hidden.length === 1 ? "element matches but has" : "elements match but have"} no area on the screen (zero-size or off-screen): ${candidates(hidden, mask)}`,
      field,
      NOT_DISPATCHED,
    );
  }
  const hint = near.length > 0 ? `; close: ${candidates(near, mask)}` : "";
  throw farmError(Errors.ELEMENT_NOT_FOUND, `no element on the screen has ${what} (${total} elements read)${hint}`, field, NOT_DISPATCHED);
}

/** Has an area, and its centre is inside its window. */
export function isTappable(bounds: UiRect, window: UiRect): boolean {
  if (bounds.right <= bounds.left || bounds.bottom <= bounds.top) return false;
  const { x, y } = centre(bounds);
  return x >= 0 && y >= 0 && x >= window.left && x < window.right && y >= window.top && y < window.bottom;
}

/** The centre, rounded down: always inside a rectangle with an area (right and bottom are exclusive). */
export function centre(b: UiRect): { x: number; y: number } {
  return { x: Math.floor((b.left + b.right) / 2), y: Math.floor((b.top + b.bottom) / 2) };
}

function isNearMiss(by: By, have: string, want: string): boolean {
  if (have === "") return false;
  if (by === "resourceId") return have.endsWith(`:id/${want}`) || want.endsWith(`:id/${have.split(":id/").pop() ?? ""}`);
  return have.trim().toLowerCase() === want.trim().toLowerCase();
}

/** `android.widget.Button "Next" id=…:id/next [48,700][1032,868]; …` for up to five, then how many more. */
export function candidates(list: readonly UiElementInit[], mask?: Redactor): string {
  const shown = list.slice(0, CANDIDATES_SHOWN).map((e) => describeElement(e, mask));
  const more = list.length > CANDIDATES_SHOWN ? `; and ${list.length - CANDIDATES_SHOWN} more` : "";
  return shown.join("; ") + more;
}

/** One element in a line; `mask` masks its text before it is cut. */
export function describeElement(e: UiElementInit, mask?: Redactor): string {
  const m = (s: string) => (mask ? mask.text(s) : s);
  const parts = [e.type || "(no type)"];
  if (e.text) parts.push(JSON.stringify(clip(m(e.text))));
  if (e.resourceId) parts.push(`id=${m(e.resourceId)}`);
  if (e.contentDesc) parts.push(`desc=${JSON.stringify(clip(m(e.contentDesc)))}`);
  parts.push(rectText(e.bounds));
  if (!e.enabled) parts.push("(disabled)");
  return parts.join(" ");
}

export function rectText(b: UiRect): string {
  return `[${b.left},${b.top}][${b.right},${b.bottom}]`;
}

const clip = (s: string) => (s.length > 60 ? `${s.slice(0, 57)}...` : s);
