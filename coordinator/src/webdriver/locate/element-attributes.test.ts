import { describe, expect, it } from "vitest";
import { elementAttribute, elementCenter, elementRect } from "./element-attributes.js";
import { findElements } from "./find-elements.js";
import { fixtureTree, node } from "./testing/ui-trees.js";

describe("elementAttribute", () => {
  const buy = findElements(fixtureTree("device-two-windows"), "id", "com.example.shop:id/buy")[0]?.element;
  if (!buy) throw new Error("fixture without the Buy button");

  it("answers Appium's names from the element farm read", () => {
    expect(elementAttribute(buy, "text")).toBe("Buy");
    expect(elementAttribute(buy, "resource-id")).toBe("com.example.shop:id/buy");
    expect(elementAttribute(buy, "resourceId")).toBe("com.example.shop:id/buy");
    for (const name of ["content-desc", "contentDescription", "name"]) expect(elementAttribute(buy, name)).toBe("Buy now");
    expect(elementAttribute(buy, "class")).toBe("android.widget.Button");
    expect(elementAttribute(buy, "className")).toBe("android.widget.Button");
    expect(elementAttribute(buy, "package")).toBe("com.example.shop");
    expect(elementAttribute(buy, "bounds")).toBe("[40,300][540,420]");
    expect(elementAttribute(buy, "enabled")).toBe("true");
    expect(elementAttribute(buy, "clickable")).toBe("true");
    expect(elementAttribute(buy, "focused")).toBe("true");
    expect(elementAttribute(buy, "displayed")).toBe("true");
  });

  it("says false, and null for what the element does not have", () => {
    const e = node({ type: "", text: "", id: "", desc: "", pkg: "", bounds: [10, 10, 10, 50], enabled: false });
    expect(elementAttribute(e, "text")).toBe("");
    for (const name of ["resource-id", "content-desc", "name", "class", "package"]) expect([name, elementAttribute(e, name)]).toEqual([name, null]);
    expect(elementAttribute(e, "enabled")).toBe("false");
    expect(elementAttribute(e, "clickable")).toBe("false");
    expect(elementAttribute(e, "focused")).toBe("false");
    expect(elementAttribute(e, "displayed")).toBe("false");
  });

  it("answers null for what farm's tree does not carry and for unknown names, never a guess", () => {
    for (const name of ["checked", "checkable", "scrollable", "selected", "password", "long-clickable", "hint", "index", "Text", "", "__proto__", "toString"]) {
      expect([name, elementAttribute(buy, name)]).toEqual([name, null]);
    }
  });
});

describe("elementRect and elementCenter", () => {
  it("give origin and size, and the centre a tap lands on (inside, rounded down)", () => {
    const e = node({ bounds: [40, 300, 541, 421] });
    expect(elementRect(e)).toEqual({ x: 40, y: 300, width: 501, height: 121 });
    expect(elementCenter(e)).toEqual({ x: 290, y: 360 });
    const one = node({ bounds: [7, 9, 8, 10] });
    expect(elementCenter(one)).toEqual({ x: 7, y: 9 });
  });

  it("never give a negative size, and keep negative origins (an element off the left edge)", () => {
    expect(elementRect(node({ bounds: [100, 100, 50, 40] }))).toEqual({ x: 100, y: 100, width: 0, height: 0 });
    expect(elementRect(node({ bounds: [-300, 2214, -90, 2340] }))).toEqual({ x: -300, y: 2214, width: 210, height: 126 });
    expect(elementCenter(node({ bounds: [-300, 2214, -90, 2340] }))).toEqual({ x: -195, y: 2277 });
  });
});
