import { h } from "./dom.js";

/** What a node is called in the tree: its class, then its text or resource id, then its bounds. */
function describe(el: Element): string {
  const cls = (el.getAttribute("class") ?? el.tagName).split(".").pop() ?? el.tagName;
  const text = el.getAttribute("text") || el.getAttribute("content-desc") || el.getAttribute("resource-id") || "";
  const bounds = el.getAttribute("bounds") ?? "";
  return [cls, text && `"${text}"`, bounds].filter(Boolean).join(" ");
}

/**
 * A UIAutomator hierarchy as nested disclosure widgets: keyboard operable
 * (summary is a button), collapsed below the top level so big trees stay
 * readable.
 */
export function hierarchyTree(xml: string): HTMLElement {
  const doc = new DOMParser().parseFromString(xml, "application/xml");
  if (doc.querySelector("parsererror")) return h("p", { class: "error" }, "The hierarchy is not well-formed XML.");
  const build = (el: Element, depth: number): HTMLElement => {
    const children = [...el.children].filter((c) => c.tagName === "node");
    if (children.length === 0) return h("div", { class: "leaf", "data-node": describe(el) }, describe(el));
    return h("details", { open: depth < 1, "data-node": describe(el) }, h("summary", {}, describe(el), ` (${children.length})`), h("div", { class: "children" }, children.map((c) => build(c, depth + 1))));
  };
  const roots = [...doc.documentElement.children].filter((c) => c.tagName === "node");
  return h("div", { class: "tree" }, roots.length ? roots.map((r) => build(r, 0)) : h("p", {}, "Empty hierarchy."));
}

interface SdkNode {
  class?: string;
  text?: string;
  resourceId?: string;
  contentDesc?: string;
  bounds?: number[];
  children?: SdkNode[];
}

/** The app SDK's own tree (hierarchy.json), shown the same way as UIAutomator's. */
export function jsonHierarchyTree(json: string): HTMLElement {
  let root: SdkNode | undefined;
  try {
    root = (JSON.parse(json) as { root?: SdkNode }).root;
  } catch {
    root = undefined;
  }
  if (!root) return h("p", { class: "error" }, "The app's hierarchy has no root node.");
  const describeNode = (n: SdkNode) =>
    [(n.class ?? "?").split(".").pop(), n.text || n.contentDesc || n.resourceId ? `"${n.text || n.contentDesc || n.resourceId}"` : "", n.bounds ? `[${n.bounds[0]},${n.bounds[1]}][${n.bounds[2]},${n.bounds[3]}]` : ""].filter(Boolean).join(
      " ",
    );
  const build = (n: SdkNode, depth: number): HTMLElement => {
    const children = n.children ?? [];
    if (children.length === 0) return h("div", { class: "leaf" }, describeNode(n));
    return h("details", { open: depth < 1 }, h("summary", {}, describeNode(n), ` (${children.length})`), h("div", { class: "children" }, children.map((c) => build(c, depth + 1))));
  };
  return h("div", { class: "tree" }, build(root, 0));
}

/** farm.v1.UiElement as protobuf JSON (default values are left out). */
export interface UiElementJson {
  type?: string;
  text?: string;
  resourceId?: string;
  contentDesc?: string;
  bounds?: { left?: number; top?: number; right?: number; bottom?: number };
  enabled?: boolean;
  clickable?: boolean;
  focused?: boolean;
  confidence?: number;
  packageName?: string;
  children?: UiElementJson[];
}

/** The parts of one element's line: type, what identifies it, bounds, confidence, flags. */
function uiElementLine(n: UiElementJson): (HTMLElement | string)[] {
  const type = (n.type || "?").split(".").pop() ?? "?";
  const [label, kind] = n.text ? [n.text, "text"] : n.resourceId ? [n.resourceId, "id"] : n.contentDesc ? [n.contentDesc, "desc"] : ["", ""];
  const b = n.bounds ?? {};
  const parts: (HTMLElement | string)[] = [h("span", { class: "node-type", title: n.type ?? "" }, type)];
  if (label) parts.push(" ", h("span", { class: "node-label", "data-kind": kind, title: kind === "text" ? "text" : kind === "id" ? "resource id" : "content description" }, `"${label}"`));
  if (n.bounds) parts.push(" ", h("span", { class: "node-bounds" }, `[${b.left ?? 0},${b.top ?? 0}][${b.right ?? 0},${b.bottom ?? 0}]`));
  if (typeof n.confidence === "number") parts.push(" ", h("span", { class: "node-confidence", title: "confidence" }, `${Math.round(n.confidence * 100)}%`));
  const flags = [n.clickable && "clickable", n.focused && "focused", !n.enabled && "disabled"].filter(Boolean);
  if (flags.length) parts.push(" ", h("span", { class: "node-flags" }, flags.join(" ")));
  return parts;
}

/** A UI tree read (farm.v1.GetUiTreeResponse roots) as nested disclosure widgets, the top level open. */
export function uiElementTree(roots: UiElementJson[]): HTMLElement {
  const build = (n: UiElementJson, depth: number): HTMLElement => {
    const children = n.children ?? [];
    if (children.length === 0) return h("div", { class: "leaf ui-node" }, uiElementLine(n));
    return h("details", { class: "ui-node", open: depth < 1 }, h("summary", {}, uiElementLine(n), h("span", { class: "count" }, ` (${children.length})`)), h("div", { class: "children" }, children.map((c) => build(c, depth + 1))));
  };
  return h("div", { class: "tree ui-tree" }, roots.map((r) => build(r, 0)));
}
