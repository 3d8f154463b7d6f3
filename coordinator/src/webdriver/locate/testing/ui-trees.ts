import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import { DOMParser, type Element as XmlElement } from "@xmldom/xmldom";
import { UiElementSchema, type UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { hierarchyRoot } from "../ui-hierarchy.js";

/** The agent's UIAutomator fixtures: devsim's Settings screen and a real phone's two-window dump (entities, a zero-size and an off-screen node). */
export type DumpFixture = "devsim-settings" | "device-two-windows";

export function readDump(name: DumpFixture): string {
  return readFileSync(new URL(`../../../../../agent/src/ui/fixtures/${name}.xml`, import.meta.url), "utf8");
}

/**
 * A UIAutomator dump as the coordinator receives it (GetUiTree's roots,
 * one per window), under one hierarchy root. Read the way the agent reads
 * it (agent/src/ui/ui-tree.ts): missing enabled reads as true.
 */
export function treeFromDump(xml: string): UiElement {
  const doc = new DOMParser().parseFromString(xml, "text/xml");
  const hierarchy = doc.documentElement;
  if (!hierarchy) throw new Error("no <hierarchy>");
  return hierarchyRoot(childElements(hierarchy).map(fromNode));
}

export function fixtureTree(name: DumpFixture): UiElement {
  return treeFromDump(readDump(name));
}

function fromNode(n: XmlElement): UiElement {
  const a = (name: string) => n.getAttribute(name) ?? "";
  const m = /^\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]$/.exec(a("bounds"));
  return create(UiElementSchema, {
    type: a("class"),
    text: a("text"),
    resourceId: a("resource-id"),
    contentDesc: a("content-desc"),
    bounds: m ? { left: Number(m[1]), top: Number(m[2]), right: Number(m[3]), bottom: Number(m[4]) } : { left: 0, top: 0, right: 0, bottom: 0 },
    enabled: a("enabled") !== "false",
    clickable: a("clickable") === "true",
    focused: a("focused") === "true",
    packageName: a("package"),
    children: childElements(n).map(fromNode),
  });
}

export function childElements(n: XmlElement): XmlElement[] {
  const out: XmlElement[] = [];
  for (let c = n.firstChild; c; c = c.nextSibling) if (c.nodeType === 1) out.push(c as XmlElement);
  return out;
}

export interface NodeSpec {
  type?: string;
  text?: string;
  id?: string;
  desc?: string;
  pkg?: string;
  bounds?: [number, number, number, number];
  enabled?: boolean;
  clickable?: boolean;
  focused?: boolean;
  children?: UiElement[];
}

/** A UiElement in one line, for trees written out in a test. */
export function node(spec: NodeSpec = {}): UiElement {
  const [left, top, right, bottom] = spec.bounds ?? [0, 0, 100, 100];
  return create(UiElementSchema, {
    type: spec.type ?? "android.view.View",
    text: spec.text ?? "",
    resourceId: spec.id ?? "",
    contentDesc: spec.desc ?? "",
    packageName: spec.pkg ?? "com.example.app",
    bounds: { left, top, right, bottom },
    enabled: spec.enabled ?? true,
    clickable: spec.clickable ?? false,
    focused: spec.focused ?? false,
    children: spec.children ?? [],
  });
}
