import { DOMParser, type Element as XmlElement } from "@xmldom/xmldom";
import { describe, expect, it } from "vitest";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { seededRandom } from "@farm/shared/testing/seeded-random";
import { escapeXml, pageSourceXml, xmlNodeName } from "./page-source.js";
import { childElements, fixtureTree, node, readDump } from "./testing/ui-trees.js";
import { hierarchyRoot } from "./ui-hierarchy.js";

/** Parses strictly: any error fails the test (xmldom only warns of U+FFFD in text, which is text like any other). */
function parseStrict(xml: string): XmlElement {
  const doc = new DOMParser({
    onError: (level, message) => {
      if (level === "warning" && message.includes("replacement character")) return;
      throw new Error(`${level}: ${message}`);
    },
  }).parseFromString(xml, "text/xml");
  if (!doc.documentElement) throw new Error("no document element");
  return doc.documentElement;
}

const KNOWN = ["package", "class", "text", "resource-id", "content-desc", "clickable", "enabled", "focused", "bounds"] as const;

describe("pageSourceXml", () => {
  it("writes a real phone's two-window dump back with every attribute farm knows, as the phone wrote it", () => {
    const dump = parseStrict(readDump("device-two-windows"));
    const source = parseStrict(pageSourceXml(fixtureTree("device-two-windows")));
    expect(source.tagName).toBe("hierarchy");
    expect(source.getAttribute("class")).toBe("hierarchy");
    let compared = 0;
    const walk = (want: XmlElement, got: XmlElement) => {
      expect(got.tagName).toBe(want.getAttribute("class"));
      for (const name of [...KNOWN, "index"]) expect([name, got.getAttribute(name)]).toEqual([name, want.getAttribute(name)]);
      const [wc, gc] = [childElements(want), childElements(got)];
      expect(gc.length).toBe(wc.length);
      wc.forEach((c, i) => walk(c, gc[i] as XmlElement));
      compared++;
    };
    const windows = childElements(dump);
    expect(childElements(source).length).toBe(windows.length);
    windows.forEach((w, i) => walk(w, childElements(source)[i] as XmlElement));
    expect(compared).toBe(10);
  });

  it("decodes the entities of the dump into text and escapes them again", () => {
    const xml = pageSourceXml(fixtureTree("device-two-windows"));
    expect(xml).toContain("text=\"Tom &amp; Jerry&#10;&quot;Deluxe&quot; &lt;edition&gt; \u2713\"");
    const title = childElements(childElements(parseStrict(xml))[0] as XmlElement)[0] as XmlElement;
    expect(title.getAttribute("text")).toBe("Tom & Jerry\n\"Deluxe\" <edition> \u2713");
  });

  it("is Appium-shaped: declaration, <hierarchy>, nodes named by class, index among siblings, displayed from the bounds", () => {
    const xml = pageSourceXml(fixtureTree("device-two-windows"));
    expect(xml.startsWith("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<hierarchy index=\"0\" class=\"hierarchy\">\n")).toBe(true);
    expect(xml).toContain("\n  <android.widget.FrameLayout index=\"0\" package=\"com.example.shop\" class=\"android.widget.FrameLayout\"");
    expect(xml).toContain("\n    <android.widget.Button index=\"1\" package=\"com.example.shop\" class=\"android.widget.Button\" text=\"Buy\"");
    // The collapsed duplicate has no area: not displayed.
    expect(xml).toMatch(/resource-id="com\.example\.shop:id\/buy_collapsed"[^>]*bounds="\[0,0\]\[0,0\]" displayed="false"/);
    expect(xml).toMatch(/resource-id="com\.example\.shop:id\/buy"[^>]*bounds="\[40,300\]\[540,420\]" displayed="true"/);
    // Attributes farm does not know are left out rather than invented.
    for (const absent of ["checkable=", "checked=", "scrollable=", "selected=", "password=", "long-clickable=", "rotation=", "width="]) expect(xml).not.toContain(absent);
  });

  it("puts a root that is one element (not a screen's windows) under <hierarchy>, and writes an empty screen", () => {
    const root = node({ type: "android.widget.FrameLayout", children: [node({ text: "a" })] });
    const h = parseStrict(pageSourceXml(root));
    expect(childElements(h).map((e) => e.tagName)).toEqual(["android.widget.FrameLayout"]);
    expect(childElements(childElements(h)[0] as XmlElement)[0]?.getAttribute("text")).toBe("a");
    const empty = parseStrict(pageSourceXml(hierarchyRoot([])));
    expect(childElements(empty)).toEqual([]);
  });

  it("names nodes whose class XML cannot hold, keeping the class attribute whole", () => {
    expect(xmlNodeName("com.example.Outer$Inner")).toBe("com.example.Outer_Inner");
    expect(xmlNodeName("")).toBe("android.view.View");
    expect(xmlNodeName("1Widget")).toBe("_1Widget");
    expect(xmlNodeName("-x")).toBe("_-x");
    expect(xmlNodeName("Kotlin Ünïcode")).toBe("Kotlin__n_code");
    const h = parseStrict(pageSourceXml(hierarchyRoot([node({ type: "com.example.Outer$Inner" }), node({ type: "" })])));
    expect(childElements(h).map((e) => [e.tagName, e.getAttribute("class")])).toEqual([
      ["com.example.Outer_Inner", "com.example.Outer$Inner"],
      ["android.view.View", ""],
    ]);
  });

  it("replaces only the characters XML 1.0 cannot carry", () => {
    expect(escapeXml("a\u0000b\u0008c\u000bd\u001fe\uFFFEf\uFFFF")).toBe("a\uFFFDb\uFFFDc\uFFFDd\uFFFDe\uFFFDf\uFFFD");
    expect(escapeXml("\uD800x\uDC00")).toBe("\uFFFDx\uFFFD");
    expect(escapeXml("\u{1F600} \t\r\n")).toBe("\u{1F600} &#9;&#13;&#10;");
    // Line ends to an XML 1.1 reader (xmldom): kept as references so no reader turns them into spaces.
    expect(escapeXml("\u0085\u2028\u2029")).toBe("&#133;&#8232;\u2029");
  });

  it("always parses back, whatever the strings in the tree (fuzz)", () => {
    // Pieces chosen to stress the escaping: markup, entity look-alikes, whitespace XML normalizes, controls, surrogates.
    const pieces = [
      "&",
      "<",
      ">",
      "\"",
      "'",
      "&amp;",
      "&#10;",
      "]]>",
      "<!--",
      "-->",
      "<?",
      "?>",
      "\t",
      "\n",
      "\r",
      "\r\n",
      " ",
      "\u0000",
      "\u0001",
      "\u001f",
      "\u007f",
      "\u0085",
      "\u2028",
      "\uD83D",
      "\uDE00",
      "\u{1F600}",
      "\uFFFE",
      "\uFFFF",
      "\uFFFD",
      "é",
      "=",
      "/",
      "a",
      "Z",
    ];
    const expected = (s: string) => s.replace(/[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "\uFFFD");
    for (let seed = 1; seed <= 300; seed++) {
      const r = seededRandom(seed);
      const str = () => Array.from({ length: Math.floor(r() * 12) }, () => pieces[Math.floor(r() * pieces.length)]).join("");
      const make = (depth: number): UiElement =>
        node({
          type: r() < 0.2 ? str() : "android.widget.TextView",
          text: str(),
          id: str(),
          desc: str(),
          pkg: str(),
          children: depth < 3 ? Array.from({ length: Math.floor(r() * 3) }, () => make(depth + 1)) : [],
        });
      const tree = hierarchyRoot([make(0), make(0)]);
      let h: XmlElement;
      try {
        h = parseStrict(pageSourceXml(tree));
      } catch (e) {
        throw new Error(`seed ${seed}: ${(e as Error).message}`);
      }
      const check = (e: UiElement, x: XmlElement) => {
        expect([seed, x.getAttribute("text"), x.getAttribute("resource-id"), x.getAttribute("content-desc"), x.getAttribute("package"), x.getAttribute("class")])
          .toEqual([seed, expected(e.text), expected(e.resourceId), expected(e.contentDesc), expected(e.packageName), expected(e.type)]);
        const xc = childElements(x);
        expect(xc.length).toBe(e.children.length);
        e.children.forEach((c, i) => check(c, xc[i] as XmlElement));
      };
      tree.children.forEach((w, i) => check(w, childElements(h)[i] as XmlElement));
    }
  });
});
