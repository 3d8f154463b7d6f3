import type { Rect, UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { isHierarchyRoot } from "./ui-hierarchy.js";

/**
 * The UI tree as Appium's UiAutomator2 driver writes its page source: an
 * XML declaration, a `<hierarchy>` element, and one element per node named
 * by its class (`<android.widget.Button …>`), indented two spaces a level.
 *
 * A root of type `hierarchy` (ui-hierarchy.ts: a screen's windows) is the
 * `<hierarchy>` element; any other root is its one child. The XPath locator
 * evaluates over exactly this document, so what an XPath can see is what a
 * client sees here.
 *
 * Attributes, per node: index (position among its parent's children),
 * package, class, text, resource-id, content-desc, clickable, enabled,
 * focused, bounds `[l,t][r,b]` and displayed. `displayed` is derived, not
 * read: true when the bounds have an area (UIAutomator dumps leave out views
 * that are not visible to the user, so what remains with an area is shown;
 * an app SDK's zero-size node is not).
 *
 * Left out because farm's tree (farm.v1.UiElement) does not carry them, and
 * an invented value would be worse than none: checkable, checked,
 * focusable, long-clickable, password, scrollable, selected, hint,
 * drawing-order, a11y-important, screen-reader-focusable, input-type and
 * the other newer UiAutomator2 attributes; on `<hierarchy>`, rotation,
 * width and height. An XPath naming one of them matches nothing.
 */
export function pageSourceXml(root: UiElement): string {
  const out: string[] = ["<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<hierarchy index=\"0\" class=\"hierarchy\""];
  const windows = isHierarchyRoot(root) ? root.children : [root];
  if (windows.length === 0) {
    out.push("/>\n");
    return out.join("");
  }
  out.push(">\n");
  windows.forEach((w, i) => writeNode(out, w, i, 1));
  out.push("</hierarchy>\n");
  return out.join("");
}

function writeNode(out: string[], e: UiElement, index: number, depth: number): void {
  const indent = "  ".repeat(depth);
  const name = xmlNodeName(e.type);
  out.push(`${indent}<${name}`);
  for (const [attr, value] of nodeAttributes(e, index)) out.push(` ${attr}="${escapeXml(value)}"`);
  if (e.children.length === 0) {
    out.push("/>\n");
    return;
  }
  out.push(">\n");
  e.children.forEach((c, i) => writeNode(out, c, i, depth + 1));
  out.push(`${indent}</${name}>\n`);
}

/** A node's attributes in page-source order; `index` is its position among its parent's children. */
export function nodeAttributes(e: UiElement, index: number): [string, string][] {
  return [
    ["index", String(index)],
    ["package", e.packageName],
    ["class", e.type],
    ["text", e.text],
    ["resource-id", e.resourceId],
    ["content-desc", e.contentDesc],
    ["clickable", String(e.clickable)],
    ["enabled", String(e.enabled)],
    ["focused", String(e.focused)],
    ["bounds", boundsText(e.bounds)],
    ["displayed", String(hasArea(e.bounds))],
  ];
}

/** A node's class as an element name: no class reads as android.view.View (Appium's default), and a character an XML name cannot hold (`$` of an inner class) becomes `_`; the class attribute keeps it whole. */
export function xmlNodeName(type: string): string {
  if (type === "") return "android.view.View";
  const safe = type.replace(/[^A-Za-z0-9_.-]/g, "_");
  return /^[A-Za-z_]/.test(safe) ? safe : `_${safe}`;
}

/**
 * Text as an attribute value: the markup characters and the whitespace an
 * XML parser would otherwise normalize to spaces (NEL and LINE SEPARATOR
 * too: XML 1.1 parsers, xmldom among them, treat them as line ends) are
 * written as references;
 * characters XML 1.0 cannot carry at all (most C0 controls, lone surrogates,
 * U+FFFE/U+FFFF) become U+FFFD, so the document always parses.
 */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"\t\n\r\u0085\u2028]|[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, (c) => ESCAPES[c] ?? "\uFFFD");
}

/** Text as a reader of the page source gets it back: only what XML 1.0 cannot carry is changed (to U+FFFD). */
export function xmlSafeText(text: string): string {
  return text.replace(/[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "\uFFFD");
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "\t": "&#9;", "\n": "&#10;", "\r": "&#13;", "\u0085": "&#133;", "\u2028": "&#8232;" };

export function boundsText(b: Rect | undefined): string {
  return b ? `[${b.left},${b.top}][${b.right},${b.bottom}]` : "[0,0][0,0]";
}

export function hasArea(b: Rect | undefined): boolean {
  return b !== undefined && b.right > b.left && b.bottom > b.top;
}
