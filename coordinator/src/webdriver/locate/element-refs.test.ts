import { describe, expect, it } from "vitest";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { WebDriverError } from "../webdriver-error.js";
import { ElementRefs } from "./element-refs.js";
import { findElements } from "./find-elements.js";
import { fixtureTree, node } from "./testing/ui-trees.js";
import { hierarchyRoot } from "./ui-hierarchy.js";

function wdError(f: () => unknown): WebDriverError {
  try {
    f();
  } catch (e) {
    if (e instanceof WebDriverError) return e;
    throw e;
  }
  throw new Error("expected a WebDriverError");
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("ElementRefs", () => {
  const settings = fixtureTree("devsim-settings");

  it("gives the same element the same id, found twice or by two locators, and different elements different ids", () => {
    const refs = new ElementRefs();
    const [display] = findElements(settings, "id", "com.android.settings:id/display");
    const [again] = findElements(fixtureTree("devsim-settings"), "xpath", "//*[@resource-id='com.android.settings:id/display']");
    if (!display || !again) throw new Error("fixture without Display");
    const id = refs.remember(display);
    expect(id).toMatch(UUID);
    expect(refs.remember(again)).toBe(id);
    const titles = findElements(settings, "id", "android:id/title");
    const ids = titles.map((t) => refs.remember(t));
    expect(new Set(ids).size).toBe(3);
    expect(ids).not.toContain(id);
    // Another session derives the same id for the same element: nothing in it is secret or per-process.
    expect(new ElementRefs().remember(display)).toBe(id);
  });

  it("resolves an id to the element as the current tree holds it (text may change: typing keeps the element)", () => {
    const refs = new ElementRefs();
    const [field] = findElements(settings, "id", "com.android.settings:id/network");
    if (!field) throw new Error("fixture without network");
    const id = refs.remember(field);
    const typed = structuredCloneTree(settings);
    const target = typed.children[0]?.children[0]?.children[1];
    if (!target) throw new Error("fixture shape changed");
    target.text = "typed";
    target.focused = true;
    const r = refs.resolve(id, typed);
    expect(r.path).toEqual(field.path);
    expect(r.element.text).toBe("typed");
    expect(r.element).toBe(target);
  });

  it("answers stale element reference when the place is gone or holds another element", () => {
    const refs = new ElementRefs();
    const [about] = findElements(settings, "id", "com.android.settings:id/about");
    if (!about) throw new Error("fixture without About");
    const id = refs.remember(about);

    const moved = structuredCloneTree(settings);
    const m = moved.children[0]?.children[0]?.children[3];
    if (!m?.bounds) throw new Error("fixture shape changed");
    m.bounds.top += 10;
    const e1 = wdError(() => refs.resolve(id, moved));
    expect(e1.code).toBe("stale element reference");
    expect(e1.message).toContain("[42,567][1038,714]");
    expect(e1.httpStatus).toBe(404);

    const reclassed = structuredCloneTree(settings);
    const c = reclassed.children[0]?.children[0]?.children[3];
    if (!c) throw new Error("fixture shape changed");
    c.type = "android.widget.Button";
    expect(wdError(() => refs.resolve(id, reclassed)).code).toBe("stale element reference");

    const otherScreen = hierarchyRoot([node({ type: "android.widget.FrameLayout", children: [node()] })]);
    const e3 = wdError(() => refs.resolve(id, otherScreen));
    expect(e3.code).toBe("stale element reference");
    expect(e3.message).toContain("holds nothing");

    // Back on the first screen, the same id resolves again: stale is about the tree now, not forever.
    expect(refs.resolve(id, settings).element.resourceId).toBe("com.android.settings:id/about");
  });

  it("answers no such element for an id it never gave", () => {
    const refs = new ElementRefs();
    for (const id of ["", "nope", "00000000-0000-0000-0000-000000000000", "__proto__", "constructor"]) {
      const e = wdError(() => refs.resolve(id, settings));
      expect([id, e.code]).toEqual([id, "no such element"]);
    }
  });

  it("remembers at most its cap, forgetting the least recently used first", () => {
    const refs = new ElementRefs(3);
    const all = findElements(settings, "xpath", "//*");
    expect(all.length).toBe(10);
    const [a, b, c, d] = all.map((e) => e);
    if (!a || !b || !c || !d) throw new Error("fixture shape changed");
    const [ia, ib, ic] = [refs.remember(a), refs.remember(b), refs.remember(c)];
    refs.resolve(ia, settings); // a is now the most recent; b the oldest
    const id = refs.remember(d);
    expect(refs.size).toBe(3);
    expect(wdError(() => refs.resolve(ib, settings)).message).toContain("remembers its last 3 elements");
    for (const kept of [ia, ic, id]) expect(refs.resolve(kept, settings).path.length).toBeGreaterThan(0);
    // Found again, a forgotten element gets its old id back.
    expect(refs.remember(b)).toBe(ib);
    const many = new ElementRefs(4);
    for (const e of all) many.remember(e);
    expect(many.size).toBe(4);
    expect(() => new ElementRefs(0)).toThrow(RangeError);
  });

  it("keeps its own copy of the path, so a caller changing its array changes nothing", () => {
    const refs = new ElementRefs();
    const path = [0, 0, 2];
    const element = settings.children[0]?.children[0]?.children[2] as UiElement;
    const id = refs.remember({ path, element });
    path[2] = 3;
    expect(refs.resolve(id, settings).element.resourceId).toBe("com.android.settings:id/display");
  });
});

function structuredCloneTree(root: UiElement): UiElement {
  const copy = (e: UiElement): UiElement => ({ ...e, bounds: e.bounds ? { ...e.bounds } : undefined, children: e.children.map(copy) }) as UiElement;
  return copy(root);
}

describe("ElementRefs memory", () => {
  it("holds no node of a tree it was given (an old screen can be collected)", () => {
    const refs = new ElementRefs();
    const root = fixtureTree("devsim-settings");
    const found = findElements(root, "xpath", "//*");
    for (const f of found) refs.remember(f);
    // Every node of the tree, by identity: none may be reachable from the refs.
    const nodes = new Set<unknown>(found.map((f) => f.element));
    const seen = new Set<unknown>();
    const reach = (v: unknown): void => {
      if (typeof v !== "object" || v === null || seen.has(v)) return;
      seen.add(v);
      expect(nodes.has(v)).toBe(false);
      const values = v instanceof Map ? [...v.keys(), ...v.values()] : Object.values(v);
      for (const x of values) reach(x);
    };
    reach(refs);
    expect(seen.size).toBeGreaterThan(found.length);
  });
});
