/** What tapping a node does to the scene. */
export type TapAction =
  | { type: "navigate"; screen: string }
  | { type: "back" }
  | { type: "toggle"; key: string }
  | { type: "focus"; key: string }
  | { type: "launch"; packageName: string }
  | { type: "set"; key: string; value: string };

/** Bounds as UIAutomator writes them: [left,top][right,bottom]. */
export interface Bounds {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

/** One view in the UI tree, with the attributes `uiautomator dump` reports. */
export interface UiNode {
  className: string;
  packageName: string;
  text: string;
  resourceId: string;
  contentDesc: string;
  bounds: Bounds;
  checkable: boolean;
  checked: boolean;
  clickable: boolean;
  enabled: boolean;
  focusable: boolean;
  focused: boolean;
  scrollable: boolean;
  password: boolean;
  selected: boolean;
  children: UiNode[];
  /** Simulator only: what a tap does. Not part of the dump. */
  onTap?: TapAction | undefined;
  /** Simulator only: fill colour for rendering. */
  color?: string | undefined;
}

export function node(fields: Partial<UiNode> & Pick<UiNode, "className" | "packageName" | "bounds">): UiNode {
  return {
    text: "",
    resourceId: "",
    contentDesc: "",
    checkable: false,
    checked: false,
    clickable: false,
    enabled: true,
    focusable: false,
    focused: false,
    scrollable: false,
    password: false,
    selected: false,
    children: [],
    ...fields,
  };
}

export function contains(bounds: Bounds, x: number, y: number): boolean {
  return x >= bounds.left && x < bounds.right && y >= bounds.top && y < bounds.bottom;
}

/** The deepest enabled, clickable node under a point (what a tap hits). */
export function hitTest(root: UiNode, x: number, y: number): UiNode | undefined {
  if (!contains(root.bounds, x, y)) return undefined;
  for (let index = root.children.length - 1; index >= 0; index--) {
    const hit = hitTest(root.children[index]!, x, y);
    if (hit) return hit;
  }
  return root.clickable ? root : undefined;
}

/** Depth-first walk of every node. */
export function* walk(root: UiNode): Generator<UiNode> {
  yield root;
  for (const child of root.children) yield* walk(child);
}
