import type { UiNode } from "./ui-node.js";

const attr = (value: string) => value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");

function serialize(node: UiNode, index: number, out: string[]): void {
  const b = node.bounds;
  out.push(
    `<node index="${index}" text="${attr(node.text)}" resource-id="${attr(node.resourceId)}" class="${node.className}" package="${node.packageName}" content-desc="${
      attr(node.contentDesc)
    }" checkable="${node.checkable}" checked="${node.checked}" clickable="${node.clickable}" enabled="${node.enabled}" focusable="${node.focusable}" focused="${node.focused}" scrollable="${node.scrollable}" long-clickable="false" password="${node.password}" selected="${node.selected}" bounds="[${b.left},${b.top}][${b.right},${b.bottom}]"`,
  );
  if (node.children.length === 0) {
    out.push(" />");
    return;
  }
  out.push(">");
  node.children.forEach((child, childIndex) => serialize(child, childIndex, out));
  out.push("</node>");
}

/** The tree as `uiautomator dump` writes it: one line, UTF-8, rotation on the root. */
export function toUiautomatorXml(root: UiNode, rotation: number): string {
  const out = [`<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="${rotation}">`];
  serialize(root, 0, out);
  out.push("</hierarchy>");
  return out.join("");
}
