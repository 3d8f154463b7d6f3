import { EntityDecoder } from "@nodable/entities";
import { XMLParser, XMLValidator } from "fast-xml-parser";

/**
 * One element of a screen's UI tree, normalized: the plain-data form of
 * farm.v1.UiElement (a Connect handler returns it as is), whatever the
 * source (UIAutomator's dump or an app SDK's JSON).
 */
export interface UiElementInit {
  type: string;
  text: string;
  resourceId: string;
  contentDesc: string;
  bounds: UiRect;
  enabled: boolean;
  clickable: boolean;
  focused: boolean;
  /** 0..1, only when the source gives one. */
  confidence?: number;
  packageName: string;
  children: UiElementInit[];
}

/** Screen pixels: left/top inclusive, right/bottom exclusive. */
export interface UiRect {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

/** Thrown for a document that is not a UI tree this module can read; the caller maps it to UI_TREE_FAILED. */
export class UiTreeParseError extends Error {
  override name = "UiTreeParseError";
}

/** More than this is not a screen: refused rather than shipped over the control stream. */
export const UI_TREE_MAX_NODES = 20_000;
/** Deeper than this is not a screen either (and would only exhaust the stack). */
export const UI_TREE_MAX_DEPTH = 256;

const ZERO: UiRect = Object.freeze({ left: 0, top: 0, right: 0, bottom: 0 });

type XmlNode = Record<string, unknown>;

/**
 * The elements of a `uiautomator dump` document: one root per `<node>`
 * directly under `<hierarchy>` (one per window). Attribute values are
 * decoded once (the five XML entities and numeric references such as
 * `&#10;`); a DOCTYPE's own entities are never expanded.
 */
export function parseUiAutomatorXml(xml: string): UiElementInit[] {
  const valid = XMLValidator.validate(xml);
  if (valid !== true) throw new UiTreeParseError(`not a well-formed UIAutomator document: ${valid.err.msg} (line ${valid.err.line}, column ${valid.err.col})`);
  const parser = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: "",
    preserveOrder: true,
    parseAttributeValue: false,
    parseTagValue: false,
    trimValues: false,
    ignoreDeclaration: true,
    ignorePiTags: true,
    entityDecoder: new EntityDecoder({ onInputEntity: () => "block" }),
  });
  const doc = parser.parse(xml) as XmlNode[];
  const hierarchy = doc.find((n) => Array.isArray(n["hierarchy"]));
  if (!hierarchy) throw new UiTreeParseError("not a UIAutomator document: no <hierarchy> element");
  const counter = { nodes: 0 };
  return childNodes(hierarchy["hierarchy"] as XmlNode[]).map((n) => fromXmlNode(n, 0, counter));
}

function childNodes(children: XmlNode[]): XmlNode[] {
  return children.filter((c) => Array.isArray(c["node"]));
}

function fromXmlNode(n: XmlNode, depth: number, counter: { nodes: number }): UiElementInit {
  admit(depth, counter);
  const a = (n[":@"] ?? {}) as Record<string, string>;
  const attr = (name: string) => (typeof a[name] === "string" ? a[name] : "");
  return {
    type: attr("class"),
    text: attr("text"),
    resourceId: attr("resource-id"),
    contentDesc: attr("content-desc"),
    bounds: parseBounds(attr("bounds")),
    // UIAutomator omits nothing, but a missing flag reads as Android's default for a view.
    enabled: a["enabled"] === undefined ? true : a["enabled"] === "true",
    clickable: a["clickable"] === "true",
    focused: a["focused"] === "true",
    packageName: attr("package"),
    children: childNodes(n["node"] as XmlNode[]).map((c) => fromXmlNode(c, depth + 1, counter)),
  };
}

function admit(depth: number, counter: { nodes: number }): void {
  if (depth >= UI_TREE_MAX_DEPTH) throw new UiTreeParseError(`the UI tree is more than ${UI_TREE_MAX_DEPTH} levels deep`);
  if (++counter.nodes > UI_TREE_MAX_NODES) throw new UiTreeParseError(`the UI tree has more than ${UI_TREE_MAX_NODES} elements`);
}

/** `[left,top][right,bottom]` as UIAutomator writes it; anything else is an empty rectangle (never tappable). */
export function parseBounds(text: string): UiRect {
  const m = /^\[(-?\d{1,9}),(-?\d{1,9})\]\[(-?\d{1,9}),(-?\d{1,9})\]$/.exec(text.trim());
  if (!m) return { ...ZERO };
  return { left: Number(m[1]), top: Number(m[2]), right: Number(m[3]), bottom: Number(m[4]) };
}

/**
 * The elements of an app SDK's `/v1/tree` answer (`{package, root}`, or
 * `{roots: [...]}`, or a bare node). Field names are read leniently, as
 * SDKs spell them: type|class|className, resourceId|resource_id|id,
 * contentDesc|content_desc|contentDescription|accessibilityLabel, bounds as
 * [l,t,r,b], {left,top,right,bottom} or {x,y,width,height}. Flags an SDK
 * does not report read as Android's defaults (enabled, not clickable, not
 * focused). A confidence passes through as 0..1 (a 0..100 one is scaled);
 * anything else is left unset.
 */
export function normalizeSdkTree(json: unknown): UiElementInit[] {
  if (!isObject(json)) throw new UiTreeParseError("the app's SDK answered with something other than a JSON object");
  const pkg = str(json["package"]) || str(json["packageName"]);
  const counter = { nodes: 0 };
  if (Array.isArray(json["roots"])) return json["roots"].map((r, i) => fromSdkNode(r, pkg, 0, counter, `roots[${i}]`));
  if (isObject(json["root"])) return [fromSdkNode(json["root"], pkg, 0, counter, "root")];
  if ("children" in json || "class" in json || "type" in json) return [fromSdkNode(json, pkg, 0, counter, "tree")];
  throw new UiTreeParseError("the app's SDK answered without a root node");
}

function fromSdkNode(v: unknown, pkg: string, depth: number, counter: { nodes: number }, path: string): UiElementInit {
  if (!isObject(v)) throw new UiTreeParseError(`the app's SDK tree has a node that is not an object at ${path}`);
  admit(depth, counter);
  const children = Array.isArray(v["children"]) ? v["children"] : [];
  const confidence = normalizeConfidence(v["confidence"]);
  const packageName = str(v["package"]) || str(v["packageName"]) || pkg;
  return {
    type: str(v["type"]) || str(v["class"]) || str(v["className"]),
    text: str(v["text"]),
    resourceId: str(v["resourceId"]) || str(v["resource_id"]) || str(v["id"]),
    contentDesc: str(v["contentDesc"]) || str(v["content_desc"]) || str(v["contentDescription"]) || str(v["accessibilityLabel"]),
    bounds: sdkBounds(v["bounds"]),
    enabled: typeof v["enabled"] === "boolean" ? v["enabled"] : true,
    clickable: v["clickable"] === true,
    focused: v["focused"] === true,
    ...(confidence === undefined ? {} : { confidence }),
    packageName,
    children: children.map((c, i) => fromSdkNode(c, packageName, depth + 1, counter, `${path}.children[${i}]`)),
  };
}

function sdkBounds(b: unknown): UiRect {
  const int = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? Math.round(x) : undefined);
  if (Array.isArray(b) && b.length === 4) {
    const [left, top, right, bottom] = b.map(int);
    if (left !== undefined && top !== undefined && right !== undefined && bottom !== undefined) return { left, top, right, bottom };
  } else if (isObject(b)) {
    const [left, top, right, bottom] = [int(b["left"]), int(b["top"]), int(b["right"]), int(b["bottom"])];
    if (left !== undefined && top !== undefined && right !== undefined && bottom !== undefined) return { left, top, right, bottom };
    const [x, y, w, h] = [int(b["x"]), int(b["y"]), int(b["width"]), int(b["height"])];
    if (x !== undefined && y !== undefined && w !== undefined && h !== undefined) return { left: x, top: y, right: x + w, bottom: y + h };
  }
  return { ...ZERO };
}

function normalizeConfidence(c: unknown): number | undefined {
  if (typeof c !== "number" || !Number.isFinite(c) || c < 0) return undefined;
  if (c <= 1) return c;
  if (c <= 100) return c / 100;
  return undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === "string" ? v : "");

/** Every element of the trees, roots included. */
export function countNodes(roots: readonly UiElementInit[]): number {
  let n = 0;
  for (const r of roots) n += 1 + countNodes(r.children);
  return n;
}

/** Depth-first, parents before children, with the root each element belongs to. */
export function* walkElements(roots: readonly UiElementInit[]): Generator<{ element: UiElementInit; root: UiElementInit }> {
  for (const root of roots) {
    const stack: UiElementInit[] = [root];
    while (stack.length > 0) {
      const element = stack.pop() as UiElementInit;
      yield { element, root };
      for (let i = element.children.length - 1; i >= 0; i--) stack.push(element.children[i] as UiElementInit);
    }
  }
}
