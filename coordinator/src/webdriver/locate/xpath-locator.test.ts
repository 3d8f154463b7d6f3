import { DOMParser, type Element as XmlElement } from "@xmldom/xmldom";
import { describe, expect, it } from "vitest";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { seededRandom } from "@farm/shared/testing/seeded-random";
import { pageSourceXml } from "./page-source.js";
import { childElements, fixtureTree, node } from "./testing/ui-trees.js";
import { hierarchyRoot } from "./ui-hierarchy.js";
import { WebDriverError } from "../webdriver-error.js";
import { pageSourceDocument, selectByXPath } from "./xpath-locator.js";

/** Every element as [name, attributes…] in document order. */
function flatten(h: XmlElement): string[][] {
  const out: string[][] = [];
  const walk = (e: XmlElement) => {
    const attrs: string[] = [e.tagName];
    for (let i = 0; i < e.attributes.length; i++) {
      const a = e.attributes.item(i);
      if (a) attrs.push(`${a.name}=${a.value}`);
    }
    out.push(attrs);
    childElements(e).forEach(walk);
  };
  walk(h);
  return out;
}

function parsed(root: UiElement): XmlElement {
  const parser = new DOMParser({
    onError: (level, message) => {
      // xmldom only warns of U+FFFD, which is text like any other.
      if (level !== "warning") throw new Error(message);
    },
  });
  const doc = parser.parseFromString(pageSourceXml(root), "text/xml");
  if (!doc.documentElement) throw new Error("no document element");
  return doc.documentElement;
}

describe("pageSourceDocument (what XPath runs over)", () => {
  it("is the page source a client reads: same elements, attributes and order as parsing pageSourceXml", () => {
    for (const root of [fixtureTree("device-two-windows"), fixtureTree("devsim-settings"), node({ type: "a$b", children: [node({ text: "x" })] }), hierarchyRoot([])]) {
      const built = pageSourceDocument(root);
      expect(flatten(built.hierarchy)).toEqual(flatten(parsed(root)));
    }
  });

  it("stays so for hostile strings (fuzz)", () => {
    const pieces = ["&", "<", "\"", "'", "\n", "\r\n", "\t", "\u0000", "\u0085", "\u2028", "\uD83D", "\u{1F600}", "\uFFFE", "\uFFFD", "a", " "];
    for (let seed = 1; seed <= 100; seed++) {
      const r = seededRandom(seed);
      const str = () => Array.from({ length: Math.floor(r() * 8) }, () => pieces[Math.floor(r() * pieces.length)]).join("");
      const make = (depth: number): UiElement =>
        node({ type: r() < 0.3 ? str() : "android.widget.TextView", text: str(), id: str(), desc: str(), pkg: str(), children: depth < 2 ? Array.from({ length: Math.floor(r() * 3) }, () => make(depth + 1)) : [] });
      const root = hierarchyRoot([make(0), make(0)]);
      expect([seed, flatten(pageSourceDocument(root).hierarchy)]).toEqual([seed, flatten(parsed(root))]);
    }
  });

  it("knows each element's path in the tree", () => {
    const root = fixtureTree("device-two-windows");
    const { pathOf } = pageSourceDocument(root);
    expect(pathOf.size).toBe(10);
    for (const [el, path] of pathOf) {
      let e: UiElement | undefined = root;
      for (const i of path) e = e?.children[i];
      expect(el.getAttribute("class")).toBe(e?.type);
      expect(el.getAttribute("bounds")).toBe(e?.bounds ? `[${e.bounds.left},${e.bounds.top}][${e.bounds.right},${e.bounds.bottom}]` : undefined);
    }
  });
});

describe("selectByXPath's time bound", () => {
  it("stops an expression that would run for minutes and answers invalid selector, then still answers the next one", () => {
    const root = hierarchyRoot([node({ children: Array.from({ length: 300 }, (_, i) => node({ id: `com.example.app:id/n${i}` })) })]);
    // At least cubic in the tree's size (2.7e7 node visits, each far from free): minutes, far past a 200 ms bound on any machine.
    const slow = "//*[count(//*[count(//*) > 0]) > 0]";
    let error: unknown;
    try {
      selectByXPath(root, slow, undefined, 200);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(WebDriverError);
    expect(error).toMatchObject({ code: "invalid selector", message: expect.stringContaining("ran longer than 200 ms") });
    expect(selectByXPath(root, "//*[@resource-id='com.example.app:id/n7']")).toHaveLength(1);
  });
});
