import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { toErrorReport } from "@farm/shared/errors";
import { ElementSelectorSchema, type ElementSelector } from "@farm/shared/gen/farm/v1/ui_pb";
import { describe, expect, it } from "vitest";
import { centre, isTappable, resolveElement } from "./element-selector.js";
import { createRedactor } from "@farm/shared/redaction/redactor";
import { parseUiAutomatorXml } from "./ui-tree.js";

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const settings = parseUiAutomatorXml(fixture("devsim-settings.xml"));
const shop = parseUiAutomatorXml(fixture("device-two-windows.xml"));

const byText = (value: string) => create(ElementSelectorSchema, { by: { case: "text", value } });
const byId = (value: string) => create(ElementSelectorSchema, { by: { case: "resourceId", value } });
const byDesc = (value: string) => create(ElementSelectorSchema, { by: { case: "contentDesc", value } });

function failure(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return toErrorReport(err);
  }
  throw new Error("expected a failure");
}

describe("resolveElement", () => {
  it("finds one element by text, id or description and taps its centre", () => {
    const display = resolveElement(settings, byText("Display"));
    expect(display.element).toMatchObject({ type: "android.widget.TextView", text: "Display", resourceId: "android:id/title", bounds: { left: 189, top: 399, right: 1038, bottom: 546 }, children: [] });
    expect({ x: display.x, y: display.y }).toEqual({ x: 613, y: 472 });
    // The element comes without its children.
    const row = resolveElement(settings, byId("com.android.settings:id/about"));
    expect(row.element.children).toEqual([]);
    expect(settings[0]?.children[0]?.children[3]?.children).toHaveLength(1);
    expect({ x: row.x, y: row.y }).toEqual({ x: 540, y: 640 });
    const home = resolveElement(shop, byDesc("Home"));
    expect(home.element.packageName).toBe("com.android.systemui");
    expect({ x: home.x, y: home.y }).toEqual({ x: 540, y: 2277 });
  });

  it("matches the whole value exactly: no substrings, case or whitespace changes", () => {
    expect(resolveElement(settings, byText("Network & internet")).element.text).toBe("Network & internet");
    const misses: [typeof settings, ElementSelector][] = [
      [settings, byText("Network")],
      [settings, byText("network & internet")],
      [settings, byText(" Display")],
      [settings, byId("about")],
      [shop, byDesc("Buy")],
    ];
    for (const [roots, s] of misses) expect(failure(() => resolveElement(roots, s)).code, JSON.stringify(s.by)).toBe("ELEMENT_NOT_FOUND");
    // Text with a newline in it, as decoded from &#10;.
    expect(resolveElement(shop, byText("Tom & Jerry\n\"Deluxe\" <edition> \u2713")).element.resourceId).toBe("com.example.shop:id/title");
  });

  it("says ELEMENT_NOT_FOUND with the selector, dispatched false, and near misses", () => {
    const r = failure(() => resolveElement(settings, byText("Bluetooth")));
    expect(r).toMatchObject({ code: "ELEMENT_NOT_FOUND", field: "tap.element.text", dispatched: false, ambiguous: false });
    expect(r.message).toContain("text \"Bluetooth\"");
    expect(r.message).toContain("10 elements read");
    const id = failure(() => resolveElement(settings, byId("about")));
    expect(id).toMatchObject({ code: "ELEMENT_NOT_FOUND", field: "tap.element.resource_id" });
    expect(id.message).toContain("close: android.widget.LinearLayout id=com.android.settings:id/about [42,567][1038,714]");
    const kase = failure(() => resolveElement(settings, byText("display")));
    expect(kase.message).toContain("close: android.widget.TextView \"Display\"");
  });

  it("says ELEMENT_AMBIGUOUS listing the candidates", () => {
    const r = failure(() => resolveElement(settings, byId("android:id/title")));
    expect(r).toMatchObject({ code: "ELEMENT_AMBIGUOUS", field: "tap.element.resource_id", dispatched: false, ambiguous: false });
    expect(r.message).toMatch(/^3 elements on the screen have resource id "android:id\/title"/);
    expect(r.message).toContain("android.widget.TextView \"Network & internet\" id=android:id/title [189,231][1038,378]");
    expect(r.message).toContain("android.widget.TextView \"Display\" id=android:id/title [189,399][1038,546]");
    expect(r.message).toContain("android.widget.TextView \"About phone\" id=android:id/title [189,567][1038,714]");
  });

  it("lists at most five candidates and says how many more", () => {
    const many = parseUiAutomatorXml(
      `<hierarchy><node bounds="[0,0][100,1000]">${Array.from({ length: 8 }, (_, i) => `<node class="Item" text="Row" bounds="[0,${i * 100}][100,${i * 100 + 90}]" />`).join("")}</node></hierarchy>`,
    );
    const r = failure(() => resolveElement(many, byText("Row")));
    expect(r.message).toMatch(/^8 elements/);
    expect(r.message.match(/Item "Row"/g)).toHaveLength(5);
    expect(r.message).toMatch(/and 3 more$/);
  });

  it("leaves out zero-size and off-screen elements, and says so when only those match", () => {
    // "Buy" twice: a visible button and a collapsed one with no area; the visible one wins.
    expect(resolveElement(shop, byText("Buy")).element.resourceId).toBe("com.example.shop:id/buy");
    // "Back" twice: one on the navigation bar, one laid out left of the screen.
    expect(resolveElement(shop, byDesc("Back")).element.bounds).toEqual({ left: 126, top: 2214, right: 336, bottom: 2340 });
    const below = failure(() => resolveElement(shop, byText("Reviews")));
    expect(below).toMatchObject({ code: "ELEMENT_NOT_FOUND", field: "tap.element.text" });
    expect(below.message).toContain("1 element matches but has no area on the screen (zero-size or off-screen)");
    expect(below.message).toContain("[40,2400][1040,2520]");
    const collapsed = failure(() => resolveElement(shop, byId("com.example.shop:id/buy_collapsed")));
    expect(collapsed.message).toContain("zero-size or off-screen");
  });

  it("resolves a disabled element (the result says it is disabled)", () => {
    const r = resolveElement(shop, byText("Out of stock"));
    expect(r.element.enabled).toBe(false);
  });

  it("refuses a selector without a field or with an empty value", () => {
    expect(failure(() => resolveElement(settings, create(ElementSelectorSchema, {})))).toMatchObject({ code: "INVALID_ARGUMENT", field: "tap.element", dispatched: false });
    expect(failure(() => resolveElement(settings, undefined as unknown as ElementSelector))).toMatchObject({ code: "INVALID_ARGUMENT", field: "tap.element" });
    expect(failure(() => resolveElement(settings, byText("")))).toMatchObject({ code: "INVALID_ARGUMENT", field: "tap.element.text" });
    expect(failure(() => resolveElement(settings, byDesc("x".repeat(1001))))).toMatchObject({ code: "INVALID_ARGUMENT", field: "tap.element.content_desc" });
  });

  it("in a session step, masks a secret in the elements it lists before it cuts their text", () => {
    const SECRET = "Zq7Kx9WvpL-selector";
    const mask = createRedactor({ secrets: [SECRET] });
    const label = `${"l".repeat(50)}${SECRET}`;
    const el = (top: number) => ({
      type: "android.widget.TextView",
      text: label,
      resourceId: "",
      contentDesc: "",
      bounds: { left: 0, top, right: 100, bottom: top + 50 },
      enabled: true,
      clickable: true,
      focused: false,
      packageName: "com.app",
      children: [],
    });
    const screen = [{ ...el(0), bounds: { left: 0, top: 0, right: 1000, bottom: 1000 }, text: "", children: [el(0), el(100)] }];
    const r = failure(() => resolveElement(screen, byText(label), "tap.element", mask));
    expect(r.code).toBe("ELEMENT_AMBIGUOUS");
    expect(r.message).not.toContain(SECRET.slice(0, 8));
    expect(r.message).toContain("[redacted]");
  });
});

describe("isTappable and centre", () => {
  const screen = { left: 0, top: 0, right: 1080, bottom: 2400 };
  it("needs an area and a centre inside the window", () => {
    expect(isTappable({ left: 0, top: 0, right: 1, bottom: 1 }, screen)).toBe(true);
    expect(isTappable({ left: 10, top: 10, right: 10, bottom: 50 }, screen)).toBe(false);
    expect(isTappable({ left: 10, top: 50, right: 20, bottom: 40 }, screen)).toBe(false);
    expect(isTappable({ left: 1000, top: 0, right: 1200, bottom: 10 }, screen)).toBe(false);
    expect(isTappable({ left: 1000, top: 0, right: 1150, bottom: 10 }, screen)).toBe(true);
    expect(isTappable({ left: -50, top: 0, right: 40, bottom: 10 }, screen)).toBe(false);
  });
  it("rounds down, so the point is inside a one-pixel rectangle", () => {
    expect(centre({ left: 5, top: 7, right: 6, bottom: 8 })).toEqual({ x: 5, y: 7 });
    expect(centre({ left: 42, top: 693, right: 1038, bottom: 840 })).toEqual({ x: 540, y: 766 });
  });
});
