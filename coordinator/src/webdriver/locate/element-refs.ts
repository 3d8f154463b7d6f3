import { createHash } from "node:crypto";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { WebDriverError } from "../webdriver-error.js";
import type { LocatedElement } from "./located-element.js";
import { boundsText } from "./page-source.js";
import { elementAt } from "./ui-hierarchy.js";

/** How many elements a session remembers by default (a few hundred bytes each). */
export const DEFAULT_ELEMENT_REFS_CAP = 5000;

/** Only what identifies the element: never the node itself, which would keep its whole subtree (and old screens) alive. */
interface Remembered {
  readonly path: readonly number[];
  readonly type: string;
  /** `[l,t][r,b]`, compared as text. */
  readonly bounds: string;
}

/**
 * One WebDriver session's element references. An element is where it was
 * found (its path in the UI tree) with its class and bounds at that time;
 * its id is derived from those three, so finding the same element again
 * answers the same id, even after it was forgotten.
 *
 * Memory is bounded: at most `cap` elements are remembered (path, class and
 * bounds each; never the node, which would hold its subtree), and past that
 * the one used least recently (found or resolved) is forgotten; its id then
 * answers `no such element`, as an id the session never handed out does.
 * An id whose place in the current tree is gone, or holds an element of
 * another class or other bounds, answers `stale element reference`.
 */
export class ElementRefs {
  private readonly byId = new Map<string, Remembered>();

  constructor(private readonly cap = DEFAULT_ELEMENT_REFS_CAP) {
    if (!Number.isInteger(cap) || cap < 1) throw new RangeError("ElementRefs cap must be a positive integer");
  }

  /** The element's id (a UUID-shaped digest of path, class and bounds). */
  remember(found: LocatedElement): string {
    const bounds = boundsText(found.element.bounds);
    const id = elementId(found.path, found.element.type, bounds);
    this.byId.delete(id);
    this.byId.set(id, { path: [...found.path], type: found.element.type, bounds });
    if (this.byId.size > this.cap) this.byId.delete(this.byId.keys().next().value as string);
    return id;
  }

  /** The element an id names, as it is in `root` now. */
  resolve(elementId: string, root: UiElement): LocatedElement {
    const r = this.byId.get(elementId);
    if (!r) {
      throw new WebDriverError("no such element", `no element with id ${JSON.stringify(elementId)} in this session (never found here, or forgotten: a session remembers its last ${this.cap} elements)`);
    }
    this.byId.delete(elementId);
    this.byId.set(elementId, r);
    const now = elementAt(root, r.path);
    if (!now || now.type !== r.type || boundsText(now.bounds) !== r.bounds) {
      const there = now ? `a ${now.type || "element"} at ${boundsText(now.bounds)}` : "nothing";
      throw new WebDriverError(
        "stale element reference",
        `element ${elementId} (${r.type || "element"} at ${r.bounds}) is no longer on the screen: its place in the UI tree holds ${there}`,
      );
    }
    return { path: r.path, element: now };
  }

  get size(): number {
    return this.byId.size;
  }
}

function elementId(path: readonly number[], type: string, bounds: string): string {
  const h = createHash("sha256").update(`${path.join(".")}\n${type}\n${bounds}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}
