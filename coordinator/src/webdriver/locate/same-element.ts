import type { Rect, UiElement } from "@farm/shared/gen/farm/v1/ui_pb";

/**
 * Whether two nodes of the UI tree are the same element for WebDriver: the
 * same class and the same bounds (their place, the path, is compared by the
 * caller). Text, flags and children may change: typing into a field leaves
 * it the same element; a screen that moved it or put another in its place
 * does not.
 */
export function sameElement(a: UiElement, b: UiElement): boolean {
  return a.type === b.type && sameRect(a.bounds, b.bounds);
}

function sameRect(a: Rect | undefined, b: Rect | undefined): boolean {
  const x = a ?? ZERO;
  const y = b ?? ZERO;
  return x.left === y.left && x.top === y.top && x.right === y.right && x.bottom === y.bottom;
}

const ZERO = { left: 0, top: 0, right: 0, bottom: 0 };
