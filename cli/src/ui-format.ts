import type { ResolvedElement } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { Rect, UiElement } from "@farm/shared/gen/farm/v1/ui_pb";

/** `[left,top][right,bottom]`, as UIAutomator writes bounds. */
export function rectText(b: Rect | undefined): string {
  return b ? `[${b.left},${b.top}][${b.right},${b.bottom}]` : "[0,0][0,0]";
}

/** One element on one line: type, "text", id=…, desc="…", bounds, then flags (clickable, focused, disabled, confidence). */
export function elementLine(e: UiElement, wide = false): string {
  const parts = [e.type || "(no type)"];
  if (e.text) parts.push(JSON.stringify(e.text));
  if (e.resourceId) parts.push(`id=${e.resourceId}`);
  if (e.contentDesc) parts.push(`desc=${JSON.stringify(e.contentDesc)}`);
  parts.push(rectText(e.bounds));
  if (e.clickable) parts.push("clickable");
  if (e.focused) parts.push("focused");
  if (!e.enabled) parts.push("disabled");
  if (e.confidence !== undefined) parts.push(`confidence=${Math.round(e.confidence * 100) / 100}`);
  if (wide && e.packageName) parts.push(`pkg=${e.packageName}`);
  return parts.join(" ");
}

/** The trees indented two spaces a level, roots first. */
export function treeText(roots: readonly UiElement[], wide = false): string {
  const lines: string[] = [];
  const visit = (e: UiElement, depth: number) => {
    lines.push(`${"  ".repeat(depth)}${elementLine(e, wide)}`);
    for (const c of e.children) visit(c, depth + 1);
  };
  for (const r of roots) visit(r, 0);
  return lines.join("\n");
}

/** `tapped android.widget.Button "Next" at (540, 766) [42,693][1038,840]`. */
export function tappedLine(r: ResolvedElement): string {
  const e = r.element;
  const label = e ? [e.type || "element", e.text ? JSON.stringify(e.text) : e.contentDesc ? `desc=${JSON.stringify(e.contentDesc)}` : e.resourceId ? `id=${e.resourceId}` : ""].filter(Boolean).join(" ") : "element";
  return `tapped ${label} at (${r.x}, ${r.y}) ${rectText(e?.bounds)}${e && !e.enabled ? " (disabled: the app may ignore it)" : ""}`;
}
