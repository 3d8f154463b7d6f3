import { create } from "@bufbuild/protobuf";
import { UiElementSchema, type UiElement } from "@farm/shared/gen/farm/v1/ui_pb";

/**
 * The type of a root that stands for the whole screen rather than one
 * element: GetUiTree answers one root per window, and the locators take one
 * root, so the windows become the children of a `hierarchy` root. Page
 * source writes it as the `<hierarchy>` element itself (as Appium does) and
 * no locator ever returns it.
 */
export const HIERARCHY_TYPE = "hierarchy";

/** One root for a screen's windows (GetUiTreeResponse.roots), bounded by their union. */
export function hierarchyRoot(windows: readonly UiElement[]): UiElement {
  const rects = windows.map((w) => w.bounds).filter((b) => b !== undefined);
  const bounds = rects.length === 0
    ? { left: 0, top: 0, right: 0, bottom: 0 }
    : {
      left: Math.min(...rects.map((b) => b.left)),
      top: Math.min(...rects.map((b) => b.top)),
      right: Math.max(...rects.map((b) => b.right)),
      bottom: Math.max(...rects.map((b) => b.bottom)),
    };
  return create(UiElementSchema, { type: HIERARCHY_TYPE, enabled: true, bounds, children: [...windows] });
}

export function isHierarchyRoot(element: UiElement): boolean {
  return element.type === HIERARCHY_TYPE;
}

/** The element at `path` (child indexes from the root), or undefined when the tree has none there. */
export function elementAt(root: UiElement, path: readonly number[]): UiElement | undefined {
  let node: UiElement | undefined = root;
  for (const i of path) {
    node = node.children[i];
    if (node === undefined) return undefined;
  }
  return node;
}
