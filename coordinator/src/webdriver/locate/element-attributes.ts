import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { boundsText, hasArea } from "./page-source.js";

/**
 * An element's attribute by the names Appium's UiAutomator2 driver answers
 * to, as a string, or null: for a name farm's tree does not carry
 * (checked, scrollable, selected… the same ones page source leaves out),
 * for an unknown name, and for a resource id, content description, class or
 * package the element does not have (Android reports those as null; a
 * UIAutomator dump writes them as ""). Text is always a string (empty when
 * the element shows none).
 */
export function elementAttribute(element: UiElement, name: string): string | null {
  switch (name) {
    case "text":
      return element.text;
    case "resource-id":
    case "resourceId":
      return orNull(element.resourceId);
    case "content-desc":
    case "contentDescription":
    case "name":
      return orNull(element.contentDesc);
    case "class":
    case "className":
      return orNull(element.type);
    case "package":
      return orNull(element.packageName);
    case "bounds":
      return boundsText(element.bounds);
    case "enabled":
    case "clickable":
    case "focused":
      return String(element[name]);
    case "displayed":
      return String(hasArea(element.bounds));
    default:
      return null;
  }
}

/** W3C Get Element Rect: the bounds as origin and size (a reversed rectangle has no size, never a negative one). */
export function elementRect(element: UiElement): { x: number; y: number; width: number; height: number } {
  const b = element.bounds;
  if (!b) return { x: 0, y: 0, width: 0, height: 0 };
  return { x: b.left, y: b.top, width: Math.max(0, b.right - b.left), height: Math.max(0, b.bottom - b.top) };
}

/** Where a click lands: the centre rounded down, inside the bounds whenever they have an area (right and bottom are exclusive), as `farm input tap` picks it. */
export function elementCenter(element: UiElement): { x: number; y: number } {
  const b = element.bounds;
  if (!b) return { x: 0, y: 0 };
  return { x: Math.floor((b.left + b.right) / 2), y: Math.floor((b.top + b.bottom) / 2) };
}

const orNull = (s: string): string | null => (s === "" ? null : s);
