import type { Display } from "./display.js";
import type { AppValues, ItemSpec, ScreenSpec } from "./screen-spec.js";
import { node, type UiNode } from "./ui-node.js";

const CLASS: Record<ItemSpec["kind"], string> = {
  text: "android.widget.TextView",
  button: "android.widget.Button",
  checkbox: "android.widget.CheckBox",
  switch: "android.widget.Switch",
  edit: "android.widget.EditText",
  row: "android.widget.LinearLayout",
  icon: "android.widget.TextView",
};

/**
 * Lays a screen out for the display's current logical size and density, as
 * a view hierarchy: DecorView-like root, a title bar, then the widgets in a
 * column (or a 4-wide icon grid). Sizes are in dp, so `wm density` and
 * rotation change the bounds the way they would on a phone.
 */
export function layoutScreen(spec: ScreenSpec, packageName: string, display: Display, values: AppValues, focusedKey: string | undefined): UiNode {
  const { width, height } = display.logicalSize;
  const dp = (value: number) => display.dp(value);
  const id = (name: string | undefined) => (name ? `${packageName}:id/${name}` : "");
  const root = node({ className: "android.widget.FrameLayout", packageName, bounds: { left: 0, top: 0, right: width, bottom: height }, color: spec.background ?? "#fafafa" });
  const content = node({ className: "android.widget.LinearLayout", packageName, resourceId: "android:id/content", bounds: { left: 0, top: dp(24), right: width, bottom: height } });
  root.children.push(content);
  let y = dp(24);
  if (spec.title !== undefined) {
    const bar = { left: 0, top: y, right: width, bottom: y + dp(56) };
    content.children.push(
      node({
        className: "android.view.ViewGroup",
        packageName,
        resourceId: id("toolbar"),
        bounds: bar,
        color: spec.color,
        children: [node({ className: "android.widget.TextView", packageName, text: spec.title, bounds: { ...bar, left: dp(16) } })],
      }),
    );
    y = bar.bottom + dp(8);
  }

  if (spec.layout === "grid") {
    const columns = 4;
    const cell = Math.floor(width / columns);
    spec.items.forEach((item, index) => {
      const left = (index % columns) * cell;
      const top = y + dp(48) + Math.floor(index / columns) * dp(96);
      content.children.push(widget(item, { left: left + dp(8), top, right: left + cell - dp(8), bottom: top + dp(88) }));
    });
    return root;
  }

  for (const item of spec.items) {
    const rowHeight = item.kind === "text" ? dp(40) : dp(56);
    content.children.push(widget(item, { left: dp(16), top: y, right: width - dp(16), bottom: y + rowHeight }));
    y += rowHeight + dp(8);
  }
  return root;

  function widget(item: ItemSpec, bounds: UiNode["bounds"]): UiNode {
    const enabled = item.enabled ?? true;
    const value = item.stateKey !== undefined ? values.get(item.stateKey) : undefined;
    const checkable = item.kind === "checkbox" || item.kind === "switch";
    const clickable = enabled && (item.kind !== "text" || item.onTap !== undefined);
    const tap = item.onTap ?? (checkable && item.stateKey !== undefined ? { type: "toggle" as const, key: item.stateKey } : undefined);
    const text = item.kind === "edit" ? (typeof value === "string" && value !== "" ? value : (item.hint ?? "")) : (item.text ?? "");
    const made = node({
      className: CLASS[item.kind],
      packageName,
      text: item.kind === "row" ? "" : text,
      resourceId: id(item.id),
      contentDesc: item.contentDesc ?? "",
      bounds,
      checkable,
      checked: checkable && value === true,
      clickable,
      focusable: clickable,
      focused: item.kind === "edit" && item.stateKey !== undefined && item.stateKey === focusedKey,
      enabled,
      onTap: enabled ? tap : undefined,
      color: item.kind === "button" || checkable ? spec.color : undefined,
    });
    if (item.kind === "row") {
      made.children.push(node({ className: "android.widget.TextView", packageName, resourceId: "android:id/title", text: item.text ?? "", bounds: { ...bounds, left: bounds.left + dp(56) } }));
    }
    return made;
  }
}
