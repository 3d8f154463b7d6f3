/**
 * The WebDriver locators against devsim's own screens, read the way a
 * session reads them: devsim's screen model lays the screen out,
 * `uiautomator dump`'s writer serializes it, the agent's parser reads it
 * (what GetUiTree answers), and the locators work on that. Clicks and
 * gestures go back to the same screen model (what `input tap`/`swipe` do on
 * a devsim phone), so a stale element is the real consequence of a real
 * screen change. No processes: the e2e over adb and the endpoint is
 * test/e2e/webdriver.test.ts.
 */
import { DOMParser, type Node as XmlNode } from "@xmldom/xmldom";
import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { UiElementSchema, type UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { parseUiAutomatorXml } from "@farm/agent/ui/ui-tree";
import { elementAttribute, elementCenter } from "@farm/coordinator/webdriver/locate/element-attributes";
import { ElementRefs } from "@farm/coordinator/webdriver/locate/element-refs";
import { findElements } from "@farm/coordinator/webdriver/locate/find-elements";
import { pageSourceXml } from "@farm/coordinator/webdriver/locate/page-source";
import { hierarchyRoot } from "@farm/coordinator/webdriver/locate/ui-hierarchy";
import { ELEMENT_REFERENCE_KEY, gesturesFromActions } from "@farm/coordinator/webdriver/pointer-actions";
import { WebDriverError } from "@farm/coordinator/webdriver/webdriver-error";
import { DEMO_PACKAGE, demoApp } from "../devsim/screen/apps/demo-app.js";
import { settingsApp } from "../devsim/screen/apps/settings-app.js";
import { Display } from "../devsim/screen/display.js";
import { ScreenModel } from "../devsim/screen/screen-model.js";
import { toUiautomatorXml } from "../devsim/screen/uiautomator-xml.js";

const apps = [demoApp, settingsApp];

function phone(): ScreenModel {
  return new ScreenModel(new Display({ width: 1080, height: 2400 }, 420), {
    app: (p) => apps.find((a) => a.packageName === p),
    launchable: () => apps.map((a) => ({ packageName: a.packageName, label: a.label })),
    prop: () => undefined,
    ensureRunning: () => undefined,
  });
}

/** What a session's find reads: the dump, parsed by the agent, as GetUiTree's roots under one hierarchy root. */
function read(screen: ScreenModel): UiElement {
  const tree = screen.tree();
  if (!tree) throw new Error("the screen is off");
  return hierarchyRoot(parseUiAutomatorXml(toUiautomatorXml(tree, screen.display.rotation)).map((r) => create(UiElementSchema, r)));
}

function click(screen: ScreenModel, refs: ElementRefs, id: string): void {
  const { x, y } = elementCenter(refs.resolve(id, read(screen)).element);
  expect(screen.tap(x, y)).toBe(true);
}

function one(root: UiElement, using: Parameters<typeof findElements>[1], value: string): { path: readonly number[]; element: UiElement } {
  const found = findElements(root, using, value);
  expect([using, value, found.length]).toEqual([using, value, 1]);
  return found[0] as { path: readonly number[]; element: UiElement };
}

describe("WebDriver locators on devsim screens", () => {
  it("opens Settings from the launcher by accessibility id, then finds by id, xpath and uiautomator", () => {
    const screen = phone();
    const refs = new ElementRefs();
    const icon = refs.remember(one(read(screen), "accessibility id", "Settings"));
    click(screen, refs, icon);
    expect(screen.top.packageName).toBe("com.android.settings");

    const root = read(screen);
    const display = one(root, "id", "display");
    expect(one(root, "xpath", "//android.widget.TextView[@text='Display']/..").path).toEqual(display.path);
    expect(one(root, "-android uiautomator", "new UiSelector().resourceId(\"android:id/title\").text(\"Display\")").path).toEqual([...display.path, 0]);
    expect(findElements(root, "-android uiautomator", "new UiSelector().className(\"android.widget.LinearLayout\").clickable(true)").map((f) => elementAttribute(f.element, "resource-id"))).toEqual([
      "com.android.settings:id/network",
      "com.android.settings:id/display",
      "com.android.settings:id/about",
    ]);

    // The launcher icon is gone from the screen now: its id is stale.
    const e = (() => {
      try {
        refs.resolve(icon, root);
      } catch (err) {
        return err;
      }
      return undefined;
    })();
    expect(e).toBeInstanceOf(WebDriverError);
    expect((e as WebDriverError).code).toBe("stale element reference");

    // Clicking Display navigates; the Display row's id is then stale too, and back makes it valid again.
    const row = refs.remember(display);
    click(screen, refs, row);
    expect(findElements(read(screen), "-android uiautomator", "text(\"Dark theme\")")).toHaveLength(1);
    expect(() => refs.resolve(row, read(screen))).toThrow(WebDriverError);
    screen.back();
    expect(refs.resolve(row, read(screen)).element.resourceId).toBe("com.android.settings:id/display");
  });

  it("types into a field: the field keeps its id while its text changes; a disabled button says so", () => {
    const screen = phone();
    expect(screen.start(DEMO_PACKAGE)).toBeUndefined();
    const refs = new ElementRefs();
    const field = refs.remember(one(read(screen), "id", "name"));
    expect(elementAttribute(refs.resolve(field, read(screen)).element, "text")).toBe("Your name");
    click(screen, refs, field);
    screen.text("Ada");
    const typed = refs.resolve(field, read(screen)).element;
    expect(elementAttribute(typed, "text")).toBe("Ada");
    expect(elementAttribute(typed, "focused")).toBe("true");
    expect(elementAttribute(typed, "class")).toBe("android.widget.EditText");

    const disabled = one(read(screen), "xpath", "//android.widget.Button[@enabled='false']");
    expect(elementAttribute(disabled.element, "text")).toBe("Delete account");
    expect(elementAttribute(disabled.element, "enabled")).toBe("false");

    // A tap through W3C actions on the Next button's element origin navigates, and the greeting shows what was typed.
    const next = refs.remember(one(read(screen), "-android uiautomator", "new UiSelector().className(\"android.widget.Button\").text(\"Next\")"));
    const gestures = gesturesFromActions(
      {
        actions: [{
          type: "pointer",
          id: "finger1",
          parameters: { pointerType: "touch" },
          actions: [{ type: "pointerMove", duration: 0, x: 0, y: 0, origin: { [ELEMENT_REFERENCE_KEY]: next } }, { type: "pointerDown", button: 0 }, { type: "pause", duration: 50 }, { type: "pointerUp", button: 0 }],
        }],
      },
      (id) => elementCenter(refs.resolve(id, read(screen)).element),
    );
    expect(gestures).toHaveLength(1);
    const tap = gestures[0];
    if (tap?.kind !== "tap") throw new Error(`expected a tap, got ${JSON.stringify(tap)}`);
    expect(screen.tap(tap.x, tap.y)).toBe(true);
    expect(texts(findElements(read(screen), "-android uiautomator", "new UiSelector().textStartsWith(\"Welcome,\")"))).toEqual(["Welcome, Ada!"]);
  });

  it("unlocks the keyguard with a W3C swipe, and writes page source that parses back to the same screen", () => {
    const screen = phone();
    screen.display.locked = true;
    const h = screen.display.logicalSize.height;
    const gestures = gesturesFromActions(
      [{
        type: "pointer",
        id: "finger1",
        parameters: { pointerType: "touch" },
        actions: [{ type: "pointerMove", x: 540, y: h - 200 }, { type: "pointerDown", button: 0 }, { type: "pointerMove", duration: 300, x: 540, y: 300 }, { type: "pointerUp", button: 0 }],
      }],
      () => {
        throw new Error("no element origins here");
      },
    );
    expect(gestures).toEqual([{ kind: "swipe", x1: 540, y1: h - 200, x2: 540, y2: 300, durationMs: 300 }]);
    const swipe = gestures[0];
    if (swipe?.kind === "swipe") screen.swipe(swipe.x1, swipe.y1, swipe.x2, swipe.y2);
    expect(screen.display.locked).toBe(false);

    expect(screen.start("com.android.settings")).toBeUndefined();
    const root = read(screen);
    const doc = new DOMParser().parseFromString(pageSourceXml(root), "text/xml");
    const names: string[] = [];
    const walk = (n: XmlNode) => {
      if (n.nodeType === 1) names.push(n.nodeName);
      for (let c = n.firstChild; c; c = c.nextSibling) walk(c);
    };
    if (!doc.documentElement) throw new Error("page source without a document element");
    walk(doc.documentElement);
    expect(names[0]).toBe("hierarchy");
    expect(names.slice(1)).toEqual(findElements(root, "xpath", "//*").map((f) => f.element.type));
    expect(names).toContain("android.widget.LinearLayout");
  });
});

function texts(found: readonly { element: UiElement }[]): string[] {
  return found.map((f) => f.element.text);
}
