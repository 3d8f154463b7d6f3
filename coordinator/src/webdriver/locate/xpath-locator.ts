import { createRequire } from "node:module";
import { DOMParser, type Document as XmlDocument, type Element as XmlElement, type Node as XmlNode } from "@xmldom/xmldom";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { WebDriverError } from "../webdriver-error.js";
import { pageSourceXml } from "./page-source.js";
import { isHierarchyRoot } from "./ui-hierarchy.js";

// xpath's own typings pull the browser DOM library into every file of the
// program; the one call used here is typed against xmldom's nodes instead.
const xpath = createRequire(import.meta.url)("xpath") as { select(expression: string, node: XmlNode): unknown };

const ELEMENT_NODE = 1;

/**
 * The paths of the elements an XPath 1.0 expression selects, evaluated (by
 * the `xpath` library over an `@xmldom/xmldom` document) over exactly the
 * page source a client reads, so an expression written against
 * `getPageSource()` finds what it names. From an element (`within`), the
 * expression's context node is that element and only what lies inside it
 * is kept (`.//Button` as usual; an absolute `//Button` too keeps only the
 * element's descendants, as Appium's UiAutomator2 driver does).
 *
 * An expression that does not parse, or that selects anything but
 * elements (a number, a string, attributes, text), is `invalid selector`.
 * The `<hierarchy>` element is not a screen element and is never returned.
 */
export function selectByXPath(root: UiElement, expression: string, within?: readonly number[]): number[][] {
  const doc = parsePageSource(pageSourceXml(root));
  const hierarchy = doc.documentElement;
  if (!hierarchy) throw new Error("page source without a <hierarchy> element");
  const rootIsHierarchy = isHierarchyRoot(root);
  const context = within === undefined ? doc : domAt(hierarchy, rootIsHierarchy ? within : [0, ...within]);
  let result: unknown;
  try {
    result = xpath.select(expression, context);
  } catch (e) {
    throw new WebDriverError("invalid selector", `xpath ${JSON.stringify(expression)} is not a valid XPath 1.0 expression: ${(e as Error).message}`);
  }
  if (!Array.isArray(result)) {
    throw new WebDriverError("invalid selector", `xpath ${JSON.stringify(expression)} selects a ${typeof result}, not elements`);
  }
  const paths: number[][] = [];
  for (const node of result as XmlNode[]) {
    if (node.nodeType !== ELEMENT_NODE) {
      throw new WebDriverError("invalid selector", `xpath ${JSON.stringify(expression)} selects ${nodeKind(node)}, not elements`);
    }
    if (node === hierarchy) continue;
    const domPath = pathOf(node as XmlElement, hierarchy);
    const path = rootIsHierarchy ? domPath : domPath.slice(1);
    if (within !== undefined && !(path.length > within.length && within.every((v, i) => path[i] === v))) continue;
    paths.push(path);
  }
  return paths;
}

function parsePageSource(xml: string): XmlDocument {
  // Farm writes this document itself: an error is a bug in page-source.ts, never the client's input.
  // (xmldom warns of U+FFFD, which the escaping writes for characters XML cannot carry.)
  const parser = new DOMParser({
    onError: (level, message) => {
      if (level === "warning") return;
      throw new Error(`page source did not parse (${level}): ${message}`);
    },
  });
  return parser.parseFromString(xml, "text/xml");
}

/** Element child indexes from `<hierarchy>` down to `node`. */
function pathOf(node: XmlElement, hierarchy: XmlElement): number[] {
  const path: number[] = [];
  let n: XmlNode = node;
  while (n !== hierarchy) {
    let index = 0;
    for (let s = n.previousSibling; s; s = s.previousSibling) if (s.nodeType === ELEMENT_NODE) index++;
    path.push(index);
    const parent: XmlNode | null = n.parentNode;
    if (!parent) throw new Error("an XPath result outside the page source");
    n = parent;
  }
  return path.reverse();
}

function domAt(hierarchy: XmlElement, path: readonly number[]): XmlNode {
  let n: XmlNode = hierarchy;
  for (const i of path) {
    let k = -1;
    let found: XmlNode | null = null;
    for (let c = n.firstChild; c; c = c.nextSibling) {
      if (c.nodeType === ELEMENT_NODE && ++k === i) {
        found = c;
        break;
      }
    }
    if (!found) throw new Error(`no element at [${path.join(",")}] of the page source`);
    n = found;
  }
  return n;
}

function nodeKind(node: XmlNode): string {
  switch (node.nodeType) {
    case 2:
      return `attribute ${node.nodeName}`;
    case 3:
      return "text";
    case 9:
      return "the document";
    default:
      return node.nodeName;
  }
}
