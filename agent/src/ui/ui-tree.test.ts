import { readFileSync } from "node:fs";
import { create, toJson } from "@bufbuild/protobuf";
import { UiElementSchema } from "@farm/shared/gen/farm/v1/ui_pb";
import { describe, expect, it } from "vitest";
import { countNodes, normalizeSdkTree, parseBounds, parseUiAutomatorXml, UI_TREE_MAX_NODES, UiTreeParseError, walkElements, type UiElementInit } from "./ui-tree.js";

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
/** What `uiautomator dump` wrote on a simulated phone showing Settings (test/devsim). */
const settingsXml = fixture("devsim-settings.xml");
/** A phone-style dump: pretty-printed, newer attributes, two windows, escaped text. */
const twoWindowsXml = fixture("device-two-windows.xml");

const all = (roots: UiElementInit[]) => [...walkElements(roots)].map((w) => w.element);

describe("parseUiAutomatorXml", () => {
  it("normalizes a devsim dump: class, text, ids, bounds, flags, package, children in order", () => {
    const roots = parseUiAutomatorXml(settingsXml);
    expect(roots).toHaveLength(1);
    const root = roots[0] as UiElementInit;
    expect(root).toMatchObject({ type: "android.widget.FrameLayout", packageName: "com.android.settings", bounds: { left: 0, top: 0, right: 1080, bottom: 2400 }, enabled: true, clickable: false, focused: false });
    expect(countNodes(roots)).toBe(10);
    const content = root.children[0] as UiElementInit;
    expect(content.resourceId).toBe("android:id/content");
    expect(content.children.map((c) => c.resourceId)).toEqual(["com.android.settings:id/toolbar", "com.android.settings:id/network", "com.android.settings:id/display", "com.android.settings:id/about"]);
    const network = content.children[1] as UiElementInit;
    expect(network).toMatchObject({ type: "android.widget.LinearLayout", clickable: true, text: "", bounds: { left: 42, top: 231, right: 1038, bottom: 378 } });
    // &amp; decoded.
    expect(network.children[0]).toMatchObject({ type: "android.widget.TextView", text: "Network & internet", resourceId: "android:id/title", clickable: false });
    expect(all(roots).every((e) => e.confidence === undefined)).toBe(true);
  });

  it("reads every window as a root, decodes entities and numeric references once, ignores unknown attributes", () => {
    const roots = parseUiAutomatorXml(twoWindowsXml);
    expect(roots.map((r) => r.packageName)).toEqual(["com.example.shop", "com.android.systemui"]);
    expect(countNodes(roots)).toBe(10);
    const title = all(roots).find((e) => e.resourceId === "com.example.shop:id/title");
    expect(title?.text).toBe("Tom & Jerry\n\"Deluxe\" <edition> \u2713");
    expect(all(roots).find((e) => e.resourceId === "com.example.shop:id/buy")).toMatchObject({ contentDesc: "Buy now", focused: true, clickable: true, enabled: true });
    expect(all(roots).find((e) => e.resourceId === "com.example.shop:id/notify")).toMatchObject({ enabled: false, clickable: false });
    expect(all(roots).find((e) => e.contentDesc === "Back")?.bounds).toEqual({ left: 126, top: 2214, right: 336, bottom: 2340 });
  });

  it("decodes an escaped entity reference literally (no double decoding) and never expands a DOCTYPE's entities", () => {
    const roots = parseUiAutomatorXml(`<?xml version='1.0' ?><hierarchy rotation="0"><node text="&amp;lt; &amp;#10; &apos;" bounds="[0,0][1,1]" /></hierarchy>`);
    expect(roots[0]?.text).toBe("&lt; &#10; '");
    const doctype = `<?xml version="1.0"?><!DOCTYPE hierarchy [<!ENTITY x "expanded">]><hierarchy><node text="&x;" bounds="[0,0][1,1]" /></hierarchy>`;
    expect(parseUiAutomatorXml(doctype)[0]?.text).toBe("&x;");
  });

  it("builds protobuf messages from what it returns", () => {
    const root = parseUiAutomatorXml(settingsXml)[0] as UiElementInit;
    const msg = create(UiElementSchema, root);
    const json = toJson(UiElementSchema, msg) as { children: { children: { resourceId?: string }[] }[] };
    expect(json.children[0]?.children[1]?.resourceId).toBe("com.android.settings:id/network");
  });

  it("refuses what is not a UIAutomator document", () => {
    expect(() => parseUiAutomatorXml("")).toThrow(UiTreeParseError);
    expect(() => parseUiAutomatorXml("ERROR: could not get idle state.")).toThrow(UiTreeParseError);
    expect(() => parseUiAutomatorXml(settingsXml.slice(0, 1500))).toThrow(/well-formed/);
    expect(() => parseUiAutomatorXml("<?xml version='1.0' ?><other/>")).toThrow(/no <hierarchy>/);
    // An empty hierarchy (nothing on screen) is a tree with no roots.
    expect(parseUiAutomatorXml("<?xml version='1.0' ?><hierarchy rotation=\"0\"></hierarchy>")).toEqual([]);
  });

  it("refuses a tree over the element cap", () => {
    const many = `<hierarchy><node bounds="[0,0][1,1]">${"<node bounds=\"[0,0][1,1]\" />".repeat(UI_TREE_MAX_NODES)}</node></hierarchy>`;
    expect(() => parseUiAutomatorXml(many)).toThrow(/more than 20000 elements/);
  });
});

describe("parseBounds", () => {
  it("reads [l,t][r,b], negatives included; anything else is an empty rectangle", () => {
    expect(parseBounds("[42,231][1038,378]")).toEqual({ left: 42, top: 231, right: 1038, bottom: 378 });
    expect(parseBounds("[-300,2214][-90,2340]")).toEqual({ left: -300, top: 2214, right: -90, bottom: 2340 });
    for (const bad of ["", "[1,2][3]", "1,2,3,4", "[1,2][3,4]x", "[a,b][c,d]"]) expect(parseBounds(bad), bad).toEqual({ left: 0, top: 0, right: 0, bottom: 0 });
  });
});

describe("normalizeSdkTree", () => {
  it("normalizes the devsim demo app's /v1/tree answer", () => {
    // The shape test/devsim/device/app-sdk-server.ts serves.
    const body = {
      package: "com.example.farmdemo",
      root: {
        class: "android.widget.FrameLayout",
        text: "",
        resourceId: "",
        contentDesc: "",
        bounds: [0, 0, 1080, 2400],
        checkable: false,
        checked: false,
        enabled: true,
        children: [
          { class: "android.widget.Button", text: "Next", resourceId: "com.example.farmdemo:id/next", contentDesc: "", bounds: [42, 693, 1038, 840], checkable: false, checked: false, enabled: true, children: [] },
          { class: "android.widget.Button", text: "Delete account", resourceId: "com.example.farmdemo:id/delete", contentDesc: "", bounds: [42, 861, 1038, 1008], enabled: false, children: [] },
        ],
      },
      runtimeBinding: { packageName: "com.example.farmdemo", runtimeEpoch: "e1" },
    };
    const roots = normalizeSdkTree(body);
    expect(countNodes(roots)).toBe(3);
    expect(roots[0]).toMatchObject({ type: "android.widget.FrameLayout", packageName: "com.example.farmdemo", bounds: { left: 0, top: 0, right: 1080, bottom: 2400 }, clickable: false, focused: false });
    expect(roots[0]?.children[0]).toMatchObject({ type: "android.widget.Button", text: "Next", resourceId: "com.example.farmdemo:id/next", packageName: "com.example.farmdemo", enabled: true });
    expect(roots[0]?.children[1]?.enabled).toBe(false);
    expect(all(roots).every((e) => !("confidence" in e))).toBe(true);
  });

  it("reads other spellings, passes a confidence through as 0..1, and leaves a bad one unset", () => {
    const roots = normalizeSdkTree({
      roots: [
        {
          type: "Button",
          id: "checkout",
          contentDescription: "Checkout",
          bounds: { x: 10, y: 20, width: 100, height: 50 },
          clickable: true,
          focused: true,
          confidence: 0.87,
          children: [
            { className: "Label", text: "Pay", accessibilityLabel: "Pay", bounds: { left: 1, top: 2, right: 3, bottom: 4 }, confidence: 93 },
            { type: "Icon", bounds: "nonsense", confidence: 140 },
            { type: "Icon", confidence: -1 },
          ],
        },
      ],
    });
    const [button] = roots;
    expect(button).toMatchObject({ type: "Button", resourceId: "checkout", contentDesc: "Checkout", bounds: { left: 10, top: 20, right: 110, bottom: 70 }, clickable: true, focused: true, confidence: 0.87 });
    expect(button?.children[0]).toMatchObject({ type: "Label", text: "Pay", contentDesc: "Pay", bounds: { left: 1, top: 2, right: 3, bottom: 4 }, confidence: 0.93 });
    expect(button?.children[1]?.bounds).toEqual({ left: 0, top: 0, right: 0, bottom: 0 });
    expect(button?.children[1]?.confidence).toBeUndefined();
    expect(button?.children[2]?.confidence).toBeUndefined();
    // The message keeps an unset confidence unset (proto3 optional).
    const msg = create(UiElementSchema, button as UiElementInit);
    expect(msg.confidence).toBeCloseTo(0.87, 5);
    expect(msg.children[1]?.confidence).toBeUndefined();
  });

  it("refuses answers without a tree", () => {
    expect(() => normalizeSdkTree(null)).toThrow(UiTreeParseError);
    expect(() => normalizeSdkTree([1, 2])).toThrow(UiTreeParseError);
    expect(() => normalizeSdkTree({ error: "app not in foreground" })).toThrow(/without a root/);
    expect(() => normalizeSdkTree({ root: { class: "X", children: [42] } })).toThrow(/root\.children\[0\]/);
  });
});
