import { createRequire } from "node:module";
import vm from "node:vm";
import { DOMImplementation, type Document as XmlDocument, type Element as XmlElement, type Node as XmlNode } from "@xmldom/xmldom";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { WebDriverError } from "../webdriver-error.js";
import { nodeAttributes, xmlNodeName, xmlSafeText } from "./page-source.js";
import { isHierarchyRoot } from "./ui-hierarchy.js";
import { comparePaths } from "./ui-selector.js";

// xpath's own typings pull the browser DOM library into every file of the
// program; the one call used here is typed against xmldom's nodes instead.
const xpath = createRequire(import.meta.url)("xpath") as { select(expression: string, node: XmlNode): unknown };

const ELEMENT_NODE = 1;

/**
 * The longest one XPath may run. It runs on the coordinator's event loop,
 * and XPath 1.0 lets a short expression take polynomial time in the tree's
 * size (nested predicates over //*): a vm timeout interrupts whatever runs
 * inside it, the library's own code included, so one caller's expression
 * cannot stall every other call.
 */
export const XPATH_MAX_MS = 5000;
const timed = vm.createContext({ run: (): unknown => undefined });
const runTimed = new vm.Script("run()");

function withinTime<T>(fn: () => T, maxMs: number): T {
  (timed as { run: () => unknown }).run = fn;
  try {
    return runTimed.runInContext(timed, { timeout: maxMs }) as T;
  } finally {
    (timed as { run: () => unknown }).run = () => undefined;
  }
}

/**
 * The paths of the elements an XPath 1.0 expression selects, evaluated (by
 * the `xpath` library over an `@xmldom/xmldom` document) over exactly the
 * page source a client reads, so an expression written against
 * `getPageSource()` finds what it names. From an element (`within`), the
 * expression's context node is that element and only what lies inside it
 * is kept (`.//Button` as usual; an absolute `//Button` too keeps only the
 * element's descendants: a search from an element never answers outside it).
 *
 * An expression that does not parse, or that selects anything but
 * elements (a number, a string, a boolean, attributes, the document), is
 * `invalid selector`. The document holds elements only (no text nodes:
 * page source's indentation is not content), so `text()` selects nothing.
 * The `<hierarchy>` element is not a screen element and is never returned.
 */
export function selectByXPath(root: UiElement, expression: string, within?: readonly number[], maxMs = XPATH_MAX_MS): number[][] {
  const { document, hierarchy, pathOf } = pageSourceDocument(root);
  let context: XmlNode = document;
  if (within !== undefined) {
    const at = [...pathOf].find(([, p]) => samePath(p, within));
    if (!at) throw new Error(`no element at [${within.join(",")}] of the page source`);
    context = at[0];
  }
  let result: unknown;
  try {
    result = withinTime(() => xpath.select(expression, context), maxMs);
  } catch (e) {
    if ((e as { code?: string }).code === "ERR_SCRIPT_EXECUTION_TIMEOUT") {
      throw new WebDriverError("invalid selector", `xpath ${JSON.stringify(expression)} ran longer than ${maxMs} ms over this screen; simplify it (or find by id, accessibility id or UiSelector)`);
    }
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
    const path = pathOf.get(node as XmlElement);
    if (!path) throw new Error("an XPath result outside the page source");
    if (within !== undefined && !(path.length > within.length && within.every((v, i) => path[i] === v))) continue;
    paths.push([...path]);
  }
  // XPath node-sets are unordered; clients expect document order (the library gives it, this makes it a promise).
  return paths.sort(comparePaths);
}

/**
 * The page source as a DOM, built from the tree rather than parsed from
 * pageSourceXml's text (parsing doubled the cost): the same element names
 * and attributes (page-source.ts nodeAttributes), with text as a reader of
 * that text gets it back (xmlSafeText), and each element's path in the tree.
 */
export function pageSourceDocument(root: UiElement): { document: XmlDocument; hierarchy: XmlElement; pathOf: Map<XmlElement, readonly number[]> } {
  const document = new DOMImplementation().createDocument(null, "hierarchy", null);
  const hierarchy = document.documentElement;
  if (!hierarchy) throw new Error("xmldom made a document without its element");
  hierarchy.setAttribute("index", "0");
  hierarchy.setAttribute("class", "hierarchy");
  const pathOf = new Map<XmlElement, readonly number[]>();
  const add = (parent: XmlElement, e: UiElement, index: number, path: readonly number[]) => {
    const el = document.createElement(xmlNodeName(e.type));
    for (const [name, value] of nodeAttributes(e, index)) el.setAttribute(name, xmlSafeText(value));
    parent.appendChild(el);
    pathOf.set(el, path);
    e.children.forEach((c, i) => add(el, c, i, [...path, i]));
  };
  if (isHierarchyRoot(root)) root.children.forEach((w, i) => add(hierarchy, w, i, [i]));
  else add(hierarchy, root, 0, []);
  return { document, hierarchy, pathOf };
}

function samePath(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
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
