import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { WebDriverError } from "../webdriver-error.js";
import { locatorStrategies, type LocatedElement, type LocatorStrategy } from "./located-element.js";
import { sameElement } from "./same-element.js";
import { elementAt, isHierarchyRoot } from "./ui-hierarchy.js";
import { parseUiSelector, placedWithin, selectByUiSelector, type Placed } from "./ui-selector.js";
import { selectByXPath } from "./xpath-locator.js";

/** A selector longer than this is refused before it is read (no locator anyone writes is this long). */
export const MAX_SELECTOR_LENGTH = 4096;

/**
 * The elements of the tree a W3C / Appium locator selects, in document
 * order (parents before children, siblings by index).
 *
 * - `id`: the resource id, whole; an id without `:id/` also matches
 *   `<the element's package>:id/<id>` (Appium prefixes the app's package).
 * - `accessibility id`: the content description, whole.
 * - `class name`: the class (`android.widget.Button`), whole.
 * - `xpath`: XPath 1.0 over the page source (xpath-locator.ts).
 * - `-android uiautomator`: UiSelector chains (ui-selector.ts).
 *
 * From an element (`within`, as the endpoint resolved it in this same
 * tree), only its descendants are searched; when the tree no longer holds
 * it there, `stale element reference`. A `hierarchy` root (the screen's
 * windows) is never returned itself. Comparisons are exact: case and
 * whitespace count.
 */
export function findElements(root: UiElement, strategy: LocatorStrategy, selector: string, within?: LocatedElement): LocatedElement[] {
  if (!(locatorStrategies as readonly string[]).includes(strategy)) {
    throw new WebDriverError("invalid argument", `using: unknown locator strategy ${JSON.stringify(strategy)}; farm answers ${locatorStrategies.map((s) => `"${s}"`).join(", ")}`);
  }
  if (typeof selector !== "string" || selector === "") throw new WebDriverError("invalid argument", "value: the selector must be a non-empty string");
  if (selector.length > MAX_SELECTOR_LENGTH) throw new WebDriverError("invalid argument", `value: the selector is longer than ${MAX_SELECTOR_LENGTH} characters`);

  const scope = within ? scopeOf(root, within) : { path: [], element: root };
  const includeScope = !within && !isHierarchyRoot(root);
  switch (strategy) {
    case "id":
      return filter(scope, includeScope, idMatcher(selector));
    case "accessibility id":
      return filter(scope, includeScope, (e) => e.contentDesc === selector);
    case "class name":
      return filter(scope, includeScope, (e) => e.type === selector);
    case "xpath":
      return selectByXPath(root, selector, within?.path).map((path) => ({ path, element: elementAt(root, path) as UiElement }));
    case "-android uiautomator":
      return selectByUiSelector(parseUiSelector(selector), scope, includeScope);
  }
}

function scopeOf(root: UiElement, within: LocatedElement): Placed {
  const element = elementAt(root, within.path);
  if (!element || !sameElement(element, within.element)) {
    throw new WebDriverError("stale element reference", `the element to search from is no longer at [${within.path.join(",")}] of the screen's UI tree`);
  }
  return { path: within.path, element };
}

function idMatcher(id: string): (e: UiElement) => boolean {
  if (id.includes(":id/")) return (e) => e.resourceId === id;
  return (e) => e.resourceId === id || (e.packageName !== "" && e.resourceId === `${e.packageName}:id/${id}`);
}

function filter(scope: Placed, includeScope: boolean, test: (e: UiElement) => boolean): LocatedElement[] {
  const out: LocatedElement[] = [];
  for (const p of placedWithin(scope, includeScope)) if (test(p.element)) out.push(p);
  return out;
}
