import { describe, expect, it } from "vitest";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { seededRandom } from "@farm/shared/testing/seeded-random";
import { WebDriverError } from "../webdriver-error.js";
import { findElements, MAX_SELECTOR_LENGTH } from "./find-elements.js";
import type { LocatedElement, LocatorStrategy } from "./located-element.js";
import { fixtureTree, node } from "./testing/ui-trees.js";
import { elementAt, hierarchyRoot } from "./ui-hierarchy.js";
import { placedWithin } from "./ui-selector.js";

function wdError(f: () => unknown): WebDriverError {
  try {
    f();
  } catch (e) {
    if (e instanceof WebDriverError) return e;
    throw e;
  }
  throw new Error("expected a WebDriverError");
}

const settings = fixtureTree("devsim-settings");
const shop = fixtureTree("device-two-windows");
const ids = (found: readonly LocatedElement[]) => found.map((f) => f.element.resourceId);
const texts = (found: readonly LocatedElement[]) => found.map((f) => f.element.text);

describe("findElements by id, accessibility id and class name", () => {
  it("matches a resource id whole, and a bare id under the element's own package as Appium does", () => {
    expect(ids(findElements(settings, "id", "com.android.settings:id/display"))).toEqual(["com.android.settings:id/display"]);
    expect(ids(findElements(settings, "id", "display"))).toEqual(["com.android.settings:id/display"]);
    // android:id/title is not under the app's package: a bare "title" does not reach it, its full id does.
    expect(findElements(settings, "id", "title")).toEqual([]);
    expect(texts(findElements(settings, "id", "android:id/title"))).toEqual(["Network & internet", "Display", "About phone"]);
    // A bare id matches each element under that element's package (two windows, two packages).
    expect(ids(findElements(shop, "id", "back"))).toEqual(["com.android.systemui:id/back", "com.android.systemui:id/back"]);
    expect(findElements(settings, "id", "Display")).toEqual([]);
    expect(findElements(settings, "id", "settings:id/display")).toEqual([]);
  });

  it("answers each element with its path, in document order, the element being the tree's own node", () => {
    const found = findElements(shop, "id", "back");
    expect(found.map((f) => f.path)).toEqual([[1, 0], [1, 2]]);
    for (const f of found) expect(elementAt(shop, f.path)).toBe(f.element);
  });

  it("matches the content description whole (case and spaces count)", () => {
    expect(ids(findElements(shop, "accessibility id", "Buy now"))).toEqual(["com.example.shop:id/buy"]);
    expect(findElements(shop, "accessibility id", "buy now")).toEqual([]);
    expect(findElements(shop, "accessibility id", "Buy")).toEqual([]);
    expect(findElements(shop, "accessibility id", "Home").map((f) => f.path)).toEqual([[1, 1]]);
  });

  it("matches the class whole, and can find the root of a one-window tree but never the screen's hierarchy", () => {
    expect(texts(findElements(shop, "class name", "android.widget.Button"))).toEqual(["Buy", "Buy", "Out of stock"]);
    expect(findElements(shop, "class name", "Button")).toEqual([]);
    expect(findElements(shop, "class name", "android.widget.FrameLayout").map((f) => f.path)).toEqual([[0], [1]]);
    expect(findElements(shop, "class name", "hierarchy")).toEqual([]);
    const window = node({ type: "android.widget.FrameLayout", children: [node({ type: "android.widget.FrameLayout" })] });
    expect(findElements(window, "class name", "android.widget.FrameLayout").map((f) => f.path)).toEqual([[], [0]]);
  });

  it("searches only inside the element it starts from, never the element itself", () => {
    const [network] = findElements(settings, "id", "network");
    if (!network) throw new Error("fixture without network");
    expect(texts(findElements(settings, "id", "android:id/title", network))).toEqual(["Network & internet"]);
    expect(findElements(settings, "id", "network", network)).toEqual([]);
    const [content] = findElements(settings, "id", "android:id/content");
    if (!content) throw new Error("fixture without content");
    expect(findElements(settings, "class name", "android.widget.LinearLayout", content).map((f) => f.path)).toEqual([[0, 0, 1], [0, 0, 2], [0, 0, 3]]);
  });

  it("answers stale element reference when the element it starts from is no longer there", () => {
    const [network] = findElements(settings, "id", "network");
    if (!network) throw new Error("fixture without network");
    for (const s of ["id", "accessibility id", "class name", "xpath", "-android uiautomator"] as const) {
      const e = wdError(() => findElements(shop, s, s === "xpath" ? "//*" : s === "-android uiautomator" ? "new UiSelector().text(\"x\")" : "x", network));
      expect([s, e.code]).toEqual([s, "stale element reference"]);
    }
  });

  it("refuses an empty, overlong or non-string selector and an unknown strategy as invalid argument", () => {
    expect(wdError(() => findElements(settings, "id", "")).code).toBe("invalid argument");
    expect(wdError(() => findElements(settings, "xpath", "/".repeat(MAX_SELECTOR_LENGTH + 1))).code).toBe("invalid argument");
    expect(findElements(settings, "id", "x".repeat(MAX_SELECTOR_LENGTH))).toEqual([]);
    expect(wdError(() => findElements(settings, "id", 5 as unknown as string)).code).toBe("invalid argument");
    const e = wdError(() => findElements(settings, "css selector" as LocatorStrategy, "a"));
    expect(e.code).toBe("invalid argument");
    expect(e.message).toContain("\"css selector\"");
  });
});

describe("findElements by xpath", () => {
  it("evaluates over the page source: names, attributes, functions, axes, positions", () => {
    expect(texts(findElements(settings, "xpath", "//android.widget.TextView[@text=\"Display\"]"))).toEqual(["Display"]);
    expect(ids(findElements(settings, "xpath", "//*[@text='Display']/.."))).toEqual(["com.android.settings:id/display"]);
    expect(texts(findElements(settings, "xpath", "//*[contains(@text, 'internet')]"))).toEqual(["Network & internet"]);
    expect(texts(findElements(settings, "xpath", "//*[starts-with(@resource-id, 'android:id/t')]"))).toEqual(["Network & internet", "Display", "About phone"]);
    expect(texts(findElements(settings, "xpath", "(//android.widget.TextView)[last()]"))).toEqual(["About phone"]);
    expect(ids(findElements(settings, "xpath", "//*[@clickable='true' and @enabled='true']"))).toEqual([
      "com.android.settings:id/network",
      "com.android.settings:id/display",
      "com.android.settings:id/about",
    ]);
    expect(ids(findElements(settings, "xpath", "//android.widget.LinearLayout[@index='2']"))).toEqual(["com.android.settings:id/display"]);
    expect(ids(findElements(settings, "xpath", "//*[@text='Display']/following::android.widget.LinearLayout"))).toEqual(["com.android.settings:id/about"]);
    expect(findElements(settings, "xpath", "/hierarchy/android.widget.FrameLayout").map((f) => f.path)).toEqual([[0]]);
    expect(findElements(settings, "xpath", "//*[@checked='true']")).toEqual([]);
  });

  it("reads text with entities, newlines and quotes as the phone reported it", () => {
    const title = "Tom & Jerry\n\"Deluxe\" <edition> \u2713";
    expect(findElements(shop, "xpath", `//*[@text=concat('Tom & Jerry', '\n', '"Deluxe" <edition> \u2713')]`).map((f) => f.element.text)).toEqual([title]);
    expect(findElements(shop, "xpath", "//*[contains(@text, '<edition>')]").map((f) => f.path)).toEqual([[0, 0]]);
    expect(ids(findElements(shop, "xpath", "//*[@displayed='false']"))).toEqual(["com.example.shop:id/buy_collapsed"]);
  });

  it("returns every element in document order for //*, the same as a walk of the tree (the hierarchy left out)", () => {
    const all = findElements(shop, "xpath", "//*");
    const walked = [...placedWithin({ path: [], element: shop }, false)];
    expect(all.map((f) => f.path)).toEqual(walked.map((p) => p.path));
    expect(all.length).toBe(10);
    expect(findElements(shop, "xpath", "/hierarchy")).toEqual([]);
    expect(findElements(shop, "xpath", "//*[@text='Buy'] | //*[@content-desc='Home']").map((f) => f.path)).toEqual([[0, 1], [0, 2], [1, 1]]);
  });

  it("from an element: relative paths from it, and only what lies inside it", () => {
    const [content] = findElements(settings, "id", "android:id/content");
    if (!content) throw new Error("fixture without content");
    expect(ids(findElements(settings, "xpath", "./android.widget.LinearLayout", content))).toEqual([
      "com.android.settings:id/network",
      "com.android.settings:id/display",
      "com.android.settings:id/about",
    ]);
    expect(texts(findElements(settings, "xpath", ".//android.widget.TextView[@text='Display']", content))).toEqual(["Display"]);
    const [network] = findElements(settings, "id", "network");
    if (!network) throw new Error("fixture without network");
    expect(texts(findElements(settings, "xpath", "//android.widget.TextView", network))).toEqual(["Network & internet"]);
    expect(findElements(settings, "xpath", ".", network)).toEqual([]);
    expect(findElements(settings, "xpath", "..", network)).toEqual([]);
  });

  it("answers invalid selector for expressions that do not parse or select something other than elements", () => {
    const cases: [string, string][] = [
      ["//*[@text='Display'", "not a valid XPath"],
      ["//*[", "not a valid XPath"],
      ["///", "not a valid XPath"],
      ["//*[foo()]", "not a valid XPath"],
      ["//*[$v]", "not a valid XPath"],
      ["//x:y", "not a valid XPath"],
      ["count(//*)", "selects a number"],
      ["string(//*/@text)", "selects a string"],
      ["boolean(//*)", "selects a boolean"],
      ["//*/@text", "selects attribute text"],
      ["//@resource-id", "selects attribute resource-id"],
      ["/", "selects the document"],
    ];
    // The tree holds elements only: text() and comments select nothing (not an error, as over any element-only document).
    expect(findElements(settings, "xpath", "//*/text()")).toEqual([]);
    expect(findElements(settings, "xpath", "//comment()")).toEqual([]);
    for (const [xpath, says] of cases) {
      const e = wdError(() => findElements(settings, "xpath", xpath));
      expect([xpath, e.code]).toEqual([xpath, "invalid selector"]);
      expect([xpath, e.message]).toEqual([xpath, expect.stringContaining(says)]);
      expect(e.httpStatus).toBe(400);
    }
  });

  it("agrees with the id and accessibility id locators on random trees with hostile strings (fuzz)", () => {
    const pieces = ["a", "b", "'", "\"", "&", "<", ">", " ", "\n", "\t", ":id/", "com.x", "\u00e9", "\u{1F600}", "]]>", "\u0000", "\u2028"];
    // An XPath string literal for any text: concat() of pieces that each avoid one quote.
    const literal = (s: string) => {
      if (!s.includes("'")) return `'${s}'`;
      if (!s.includes("\"")) return `"${s}"`;
      return `concat(${s.split("'").map((p) => `'${p}'`).join(`, "'", `)})`;
    };
    for (let seed = 1; seed <= 60; seed++) {
      const r = seededRandom(seed);
      const str = () => Array.from({ length: Math.floor(r() * 4) }, () => pieces[Math.floor(r() * pieces.length)]).join("");
      const make = (depth: number): UiElement => node({ text: str(), id: str(), desc: str(), pkg: "com.x", children: depth < 3 ? Array.from({ length: Math.floor(r() * 3) }, () => make(depth + 1)) : [] });
      const tree = hierarchyRoot([make(0), make(0)]);
      for (const p of placedWithin({ path: [], element: tree }, false)) {
        const e = p.element;
        // Characters XML cannot carry are written as U+FFFD; only strings free of them round-trip.
        const clean = (s: string) => !/[\u0000]/.test(s);
        if (e.resourceId !== "" && clean(e.resourceId) && e.resourceId.includes(":id/")) {
          expect([seed, findElements(tree, "xpath", `//*[@resource-id=${literal(e.resourceId)}]`).map((f) => f.path)])
            .toEqual([seed, findElements(tree, "id", e.resourceId).map((f) => f.path)]);
        }
        if (e.contentDesc !== "" && clean(e.contentDesc)) {
          expect([seed, findElements(tree, "xpath", `//*[@content-desc=${literal(e.contentDesc)}]`).map((f) => f.path)])
            .toEqual([seed, findElements(tree, "accessibility id", e.contentDesc).map((f) => f.path)]);
        }
      }
    }
  });
});

describe("findElements by -android uiautomator", () => {
  const ui = (selector: string, root: UiElement = shop, within?: LocatedElement) => findElements(root, "-android uiautomator", selector, within);

  it("answers the text, description, resource id and class methods", () => {
    expect(ids(ui("new UiSelector().text(\"Buy\")"))).toEqual(["com.example.shop:id/buy", "com.example.shop:id/buy_collapsed"]);
    expect(texts(ui("new UiSelector().textContains(\"of sto\")"))).toEqual(["Out of stock"]);
    expect(texts(ui("new UiSelector().textStartsWith(\"Rev\")"))).toEqual(["Reviews"]);
    expect(texts(ui("new UiSelector().textMatches(\"(?s)Tom.*\u2713\")"))).toEqual(["Tom & Jerry\n\"Deluxe\" <edition> \u2713"]);
    // matches() is whole-value, as Java's.
    expect(ui("new UiSelector().textMatches(\"Rev\")")).toEqual([]);
    expect(ids(ui("new UiSelector().resourceId(\"com.example.shop:id/notify\")"))).toEqual(["com.example.shop:id/notify"]);
    expect(ids(ui("new UiSelector().resourceIdMatches(\".*:id/buy.*\")"))).toEqual(["com.example.shop:id/buy", "com.example.shop:id/buy_collapsed"]);
    expect(ids(ui("new UiSelector().description(\"Buy now\")"))).toEqual(["com.example.shop:id/buy"]);
    expect(ids(ui("new UiSelector().descriptionContains(\"om\")"))).toEqual(["com.android.systemui:id/home"]);
    expect(ids(ui("new UiSelector().descriptionStartsWith(\"Ba\")"))).toEqual(["com.android.systemui:id/back", "com.android.systemui:id/back"]);
    expect(ids(ui("new UiSelector().descriptionMatches(\"H.me\")"))).toEqual(["com.android.systemui:id/home"]);
    expect(texts(ui("new UiSelector().className(\"android.widget.Button\")"))).toEqual(["Buy", "Buy", "Out of stock"]);
    expect(ui("new UiSelector().classNameMatches(\".*ImageView\")").length).toBe(3);
    expect(ui("new UiSelector().packageName(\"com.android.systemui\")").length).toBe(4);
  });

  it("answers the flags, index and instance; criteria combine with and", () => {
    expect(texts(ui("new UiSelector().className(\"android.widget.Button\").enabled(false)"))).toEqual(["Out of stock"]);
    expect(ids(ui("new UiSelector().focused(true)"))).toEqual(["com.example.shop:id/buy"]);
    expect(ui("new UiSelector().clickable(true)").length).toBe(6);
    expect(ids(ui("new UiSelector().className(\"android.widget.Button\").index(2)"))).toEqual(["com.example.shop:id/buy_collapsed"]);
    expect(ids(ui("new UiSelector().text(\"Buy\").instance(1)"))).toEqual(["com.example.shop:id/buy_collapsed"]);
    expect(ui("new UiSelector().text(\"Buy\").instance(2)")).toEqual([]);
    expect(ids(ui("new UiSelector().instance(0).text(\"Buy\")"))).toEqual(["com.example.shop:id/buy"]);
    expect(ui("new UiSelector().text(\"Buy\").description(\"Buy now\")").length).toBe(1);
  });

  it("answers childSelector (descendants of each match) and unites statements joined by ;", () => {
    expect(texts(ui("new UiSelector().resourceId(\"com.android.settings:id/display\").childSelector(new UiSelector().className(\"android.widget.TextView\"))", settings))).toEqual(["Display"]);
    expect(texts(ui("new UiSelector().className(\"android.widget.LinearLayout\").clickable(true).childSelector(new UiSelector().resourceId(\"android:id/title\"))", settings))).toEqual([
      "Network & internet",
      "Display",
      "About phone",
    ]);
    expect(texts(ui("new UiSelector().clickable(true).instance(1).childSelector(new UiSelector().index(0))", settings))).toEqual(["Display"]);
    expect(texts(ui("new UiSelector().text(\"Reviews\"); new UiSelector().text(\"Buy\").instance(0);"))).toEqual(["Buy", "Reviews"]);
    expect(ui("new UiSelector().text(\"Buy\");new UiSelector().text(\"Buy\")").length).toBe(2);
  });

  it("accepts what clients write: whitespace, escapes, no `new`, no constructor", () => {
    expect(texts(ui("  new   UiSelector ( ) . text ( \"Reviews\" )  ;  "))).toEqual(["Reviews"]);
    expect(texts(ui("UiSelector().text(\"Reviews\")"))).toEqual(["Reviews"]);
    expect(texts(ui(".text(\"Reviews\")"))).toEqual(["Reviews"]);
    expect(texts(ui("text(\"Reviews\")"))).toEqual(["Reviews"]);
    expect(texts(ui("new UiSelector().textContains(\"\\\"Deluxe\\\"\")"))).toHaveLength(1);
    expect(texts(ui("new UiSelector().textContains(\"Jerry\\n\\u0022\")"))).toHaveLength(1);
    expect(texts(ui("new UiSelector().textContains(\"\u2713\")"))).toHaveLength(1);
    // Java's octal escapes: \42 and \042 are a double quote, \12 a newline.
    expect(texts(ui("new UiSelector().textContains(\"Jerry\\12\\42Deluxe\\042\")"))).toHaveLength(1);
    expect(texts(ui("new UiSelector().textContains(\"\\s<edition>\\s\")"))).toHaveLength(1);
  });

  it("searches inside the element it starts from", () => {
    const [window] = findElements(shop, "id", "com.android.systemui:id/home");
    if (!window) throw new Error("fixture without home");
    const [systemui] = findElements(shop, "xpath", "/hierarchy/*[2]");
    if (!systemui) throw new Error("fixture without a second window");
    expect(ui("new UiSelector().description(\"Back\")", shop, systemui).map((f) => f.path)).toEqual([[1, 0], [1, 2]]);
    expect(ui("new UiSelector().text(\"Buy\")", shop, systemui)).toEqual([]);
    expect(ui("new UiSelector().description(\"Home\")", shop, window)).toEqual([]);
  });

  it("answers invalid selector naming the method or the place, for everything else", () => {
    const cases: [string, string][] = [
      ["new UiSelector().checked(true)", "checked(): farm's UI tree does not record"],
      ["new UiSelector().scrollable(true)", "scrollable()"],
      ["new UiSelector().selected(true)", "selected()"],
      ["new UiSelector().fromParent(new UiSelector().text(\"a\"))", "fromParent()"],
      ["new UiSelector().txt(\"a\")", "unknown UiSelector method txt()"],
      ["new UiSelector().constructor(\"a\")", "unknown UiSelector method constructor()"],
      ["new UiSelector().__proto__(\"a\")", "unknown UiSelector method __proto__()"],
      ["new UiScrollable(new UiSelector().scrollable(true)).scrollIntoView(new UiSelector().text(\"a\"))", "UiScrollable is not supported"],
      ["new UiObject(new UiSelector().text(\"a\"))", "UiObject is not supported"],
      ["new UiSelector().text(1)", "text() takes a string"],
      ["new UiSelector().text(true)", "text() takes a string"],
      ["new UiSelector().clickable(\"true\")", "clickable() takes true or false"],
      ["new UiSelector().instance(-1)", "instance() takes a whole number"],
      ["new UiSelector().instance(1.5)", "expected \")\""],
      ["new UiSelector().index(12345678901)", "too large"],
      ["new UiSelector().childSelector(\"a\")", "childSelector() takes a UiSelector"],
      ["new UiSelector().text()", "text() needs one argument"],
      ["new UiSelector().text(\"a\", \"b\")", "expected \")\""],
      ["new UiSelector().text(\"a\"", "expected \")\""],
      ["new UiSelector().text(\"a)", "is not closed"],
      ["new UiSelector().text(\"a\\q\")", "bad escape"],
      ["new UiSelector().text(\"\\u12\")", "bad \\u escape"],
      ["new UiSelector().textMatches(\"(\")", "not a regular expression"],
      ["new UiSelector().textMatches(\"a{2,1}\")", "not a regular expression"],
      ["new UiSelector().textMatches(\"(?<=a)b\")", "not a regular expression"],
      ["new UiSelector(\"a\")", "UiSelector() takes no arguments"],
      ["new UiSelector().text('a')", "unexpected \"'\""],
      ["new UiSelector().text(\"a\") new UiSelector()", "unexpected \"new\""],
      ["new UiSelector().text(\"a\").instance(0).instance(1)", "instance() is given twice"],
      ["new UiSelector().childSelector(new UiSelector().text(\"a\")).childSelector(new UiSelector().text(\"b\"))", "childSelector() is given twice"],
      ["new UiSelector().childSelector(text(\"a\"))", "childSelector() needs one argument"],
      ["new UiSelector().childSelector(UiSelector)", "expected \"(\" after UiSelector"],
      ["new Foo()", "farm reads only new UiSelector()"],
      ["new", "expected a class"],
      ["UiSelector", "expected \"(\""],
      [";;", "no UiSelector given"],
      ["42", "expected new UiSelector()"],
      ["new UiSelector().", "expected a UiSelector method"],
      ["new UiSelector()..text(\"a\")", "expected a UiSelector method"],
      ["new UiSelector().text(\"a\") # comment", "unexpected \"#\""],
      [`${"new UiSelector().childSelector(".repeat(20)}new UiSelector()${")".repeat(20)}`, "nested more than 16 deep"],
    ];
    for (const [selector, says] of cases) {
      const e = wdError(() => ui(selector));
      expect([selector, e.code]).toEqual([selector, "invalid selector"]);
      expect([selector, e.message]).toEqual([selector, expect.stringContaining(says)]);
    }
  });

  it("runs a hostile regular expression in linear time", () => {
    // A backtracking engine would not finish this before the test's timeout (2^5000 ways to split the a's); RE2 reads the text once.
    const tree = hierarchyRoot([node({ text: `${"a".repeat(5000)}!` }), node({ text: "aab" })]);
    expect(texts(ui("new UiSelector().textMatches(\"(a+)+b\")", tree))).toEqual(["aab"]);
  });

  it("throws nothing but invalid selector on random token soup, and agrees with a plain filter on random valid chains (fuzz)", () => {
    // Valid selectors with random edits: some stay valid, most do not; none may throw anything else.
    const valid = [
      "new UiSelector().text(\"Buy\").instance(1)",
      "new UiSelector().className(\"android.widget.Button\").childSelector(new UiSelector().textContains(\"a\\\"b\"))",
      "new UiSelector().clickable(true).index(0); new UiSelector().descriptionMatches(\"H.*\")",
      "UiSelector().resourceIdMatches(\".*:id/(buy|back)\").enabled(false)",
    ];
    const inserts = ["new", "UiSelector", "UiScrollable", "(", ")", ".", ";", ",", "\"", "\\", "\\u", "text", "instance", "childSelector", "true", "0", "-1", "99999999999", " ", "\n", "#", "'", "[", "(?", "*"];
    let parsed = 0;
    let refused = 0;
    for (let seed = 1; seed <= 2000; seed++) {
      const r = seededRandom(seed);
      let selector = pick(r, valid);
      for (let k = Math.floor(r() * 4); k > 0; k--) {
        const at = Math.floor(r() * (selector.length + 1));
        const cut = r() < 0.5 ? Math.floor(r() * 4) : 0;
        selector = selector.slice(0, at) + (r() < 0.7 ? pick(r, inserts) : "") + selector.slice(at + cut);
      }
      try {
        ui(selector);
        parsed++;
      } catch (e) {
        if (!(e instanceof WebDriverError) || e.code !== "invalid selector") throw new Error(`seed ${seed}: ${JSON.stringify(selector)} threw ${String(e)}`);
        refused++;
      }
    }
    expect(parsed).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(100);

    type Pick = { call: string; test: (e: UiElement, index: number) => boolean };
    const all = [...placedWithin({ path: [], element: shop }, false)];
    const values = (f: (e: UiElement) => string) => [...new Set(all.map((p) => f(p.element)))];
    const picks: ((r: () => number) => Pick)[] = [
      (r) => {
        const v = pick(r, values((e) => e.text));
        return { call: `.text(${JSON.stringify(v)})`, test: (e) => e.text === v };
      },
      (r) => {
        const v = pick(r, values((e) => e.text)).slice(1, 3);
        return { call: `.textContains(${JSON.stringify(v)})`, test: (e) => e.text.includes(v) };
      },
      (r) => {
        const v = pick(r, values((e) => e.resourceId));
        return { call: `.resourceId(${JSON.stringify(v)})`, test: (e) => e.resourceId === v };
      },
      (r) => {
        const v = pick(r, values((e) => e.type));
        return { call: `.className(${JSON.stringify(v)})`, test: (e) => e.type === v };
      },
      (r) => {
        const v = r() < 0.5;
        return { call: `.clickable(${v})`, test: (e) => e.clickable === v };
      },
      (r) => {
        const v = r() < 0.7;
        return { call: `.enabled(${v})`, test: (e) => e.enabled === v };
      },
      (r) => {
        const v = Math.floor(r() * 4);
        return { call: `.index(${v})`, test: (_e, i) => i === v };
      },
    ];
    for (let seed = 1; seed <= 500; seed++) {
      const r = seededRandom(seed);
      const chosen = Array.from({ length: 1 + Math.floor(r() * 3) }, () => pick(r, picks)(r));
      const instance = r() < 0.3 ? Math.floor(r() * 3) : undefined;
      const selector = `new UiSelector()${chosen.map((c) => c.call).join("")}${instance === undefined ? "" : `.instance(${instance})`}`;
      let want = all.filter((p) => chosen.every((c) => c.test(p.element, p.path.at(-1) ?? 0))).map((p) => p.path);
      if (instance !== undefined) want = want[instance] ? [want[instance]] : [];
      expect([selector, ui(selector).map((f) => f.path)]).toEqual([selector, want]);
    }
  });
});

function pick<T>(r: () => number, list: readonly T[]): T {
  return list[Math.floor(r() * list.length)] as T;
}
