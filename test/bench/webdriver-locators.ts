/**
 * What a WebDriver find costs on the coordinator, per locator strategy,
 * against the find `farm input tap --id` does (the agent's resolveElement)
 * on the same tree, measured in the same run (ratio). Trees are devsim
 * screens (a settings-like list) of 100, 1,000 and 5,000 nodes, written as
 * `uiautomator dump` writes them and read by the agent's own parser, so the
 * locators see what a real session sees. The realistic column adds the
 * UIAutomator dump a find waits for on a Pixel over USB (latency profile
 * pixel-usb: 1.8 s plus 2.25 ms a node): what a client feels. Prints;
 * asserts nothing.
 *
 *   node test/dist/bench/webdriver-locators.js [--runs 5] [--sizes 100,1000,5000]
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { ElementSelectorSchema, UiElementSchema, type UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { resolveElement } from "@farm/agent/ui/element-selector";
import { parseUiAutomatorXml, type UiElementInit } from "@farm/agent/ui/ui-tree";
import { findElements } from "@farm/coordinator/webdriver/locate/find-elements";
import type { LocatorStrategy } from "@farm/coordinator/webdriver/locate/located-element";
import { pageSourceXml } from "@farm/coordinator/webdriver/locate/page-source";
import { hierarchyRoot } from "@farm/coordinator/webdriver/locate/ui-hierarchy";
import { LATENCY_PROFILES } from "../devsim/latency/latency-profiles.js";
import { node as uiNode, type UiNode } from "../devsim/screen/ui-node.js";
import { toUiautomatorXml } from "../devsim/screen/uiautomator-xml.js";
import { emitReport, type BenchRow } from "./bench-report.js";
import { median } from "./proc-stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "5" }, sizes: { type: "string", default: "100,1000,5000" } } });
const RUNS = Number(values.runs);
const SIZES = values.sizes.split(",").map(Number);
const PKG = "com.android.settings";
const PIXEL = LATENCY_PROFILES["pixel-usb"];

/** A settings-like list: rows of (layout, title, summary, icon), about `nodes` nodes in all; the target is the last row. */
function screen(nodes: number): UiNode {
  const rows = Math.max(1, Math.floor((nodes - 2) / 4));
  // Every row on the screen (the agent's find takes only what a tap can reach).
  const h = Math.max(1, Math.floor(2200 / rows));
  const b = (i: number) => ({ left: 0, top: 200 + i * h, right: 1080, bottom: 200 + (i + 1) * h });
  const list = Array.from({ length: rows }, (_, i) =>
    uiNode({
      className: "android.widget.LinearLayout",
      packageName: PKG,
      resourceId: `${PKG}:id/row_${i}`,
      clickable: true,
      bounds: b(i),
      children: [
        uiNode({ className: "android.widget.TextView", packageName: PKG, resourceId: "android:id/title", text: `Item ${i}`, bounds: b(i) }),
        uiNode({ className: "android.widget.TextView", packageName: PKG, resourceId: "android:id/summary", text: `Summary of item ${i}`, bounds: b(i) }),
        uiNode({ className: "android.widget.ImageView", packageName: PKG, contentDesc: `Icon ${i}`, bounds: b(i) }),
      ],
    }));
  return uiNode({
    className: "android.widget.FrameLayout",
    packageName: PKG,
    bounds: { left: 0, top: 0, right: 1080, bottom: 2400 },
    children: [uiNode({ className: "androidx.recyclerview.widget.RecyclerView", packageName: PKG, resourceId: `${PKG}:id/list`, bounds: { left: 0, top: 200, right: 1080, bottom: 2400 }, children: list })],
  });
}

function time(fn: () => unknown): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

function medianOf(fn: () => unknown): number {
  fn(); // warm-up
  return median(Array.from({ length: RUNS }, () => time(fn)));
}

function main(): void {
  const rows: BenchRow[] = [];
  const details: Record<string, unknown> = { runs: RUNS };
  for (const size of SIZES) {
    const roots: UiElementInit[] = parseUiAutomatorXml(toUiautomatorXml(screen(size), 0));
    const tree: UiElement = hierarchyRoot(roots.map((r) => create(UiElementSchema, r)));
    const count = [...findElements(tree, "xpath", "//*")].length;
    const last = Math.max(0, Math.floor((size - 2) / 4) - 1);
    const targetId = `${PKG}:id/row_${last}`;
    const floor = medianOf(() => resolveElement(roots, create(ElementSelectorSchema, { by: { case: "resourceId", value: targetId } })));
    const dump = PIXEL.uiDumpMs.medianMs + PIXEL.uiDumpMsPerNode * count;
    console.log(`${count} nodes: resolveElement by id (farm input tap --id) ${floor.toFixed(3)} ms; a pixel-usb dump ${dump.toFixed(0)} ms`);
    const cases: [string, LocatorStrategy, string][] = [
      ["id", "id", `row_${last}`],
      ["accessibility id", "accessibility id", `Icon ${last}`],
      ["class name", "class name", "androidx.recyclerview.widget.RecyclerView"],
      ["-android uiautomator text", "-android uiautomator", `new UiSelector().text("Item ${last}")`],
      ["xpath by resource-id", "xpath", `//*[@resource-id="${targetId}"]`],
      ["xpath by class and text", "xpath", `//android.widget.TextView[@text="Item ${last}"]`],
    ];
    for (const [name, strategy, selector] of cases) {
      if (findElements(tree, strategy, selector).length !== 1) throw new Error(`${name} did not find exactly one element`);
      const t = medianOf(() => findElements(tree, strategy, selector));
      const ratio = t / floor;
      const realistic = (dump + t) / (dump + floor);
      console.log(`  ${name.padEnd(26)} ${t.toFixed(3)} ms  ${ratio.toFixed(1)}x the agent's find   with a pixel-usb dump ${realistic.toFixed(3)}x`);
      details[`${size}:${name}`] = { ms: Number(t.toFixed(3)), ratio: Number(ratio.toFixed(2)), realistic: Number(realistic.toFixed(4)) };
      rows.push({
        measure: `find by ${name}, ${count} nodes`,
        instant: `${t.toFixed(2)} ms (${ratio.toFixed(1)}x)`,
        realistic: Number(realistic.toFixed(3)),
        profile: "pixel-usb",
        baseline: `resolveElement by id ${floor.toFixed(3)} ms`,
        target: strategy === "xpath" ? "" : "≤ 1.05x with the dump",
        pass: strategy === "xpath" ? null : realistic <= 1.05,
      });
    }
    const source = medianOf(() => pageSourceXml(tree));
    const json = medianOf(() => JSON.stringify(roots));
    console.log(`  page source                ${source.toFixed(3)} ms  ${(source / json).toFixed(1)}x JSON.stringify of the same tree`);
    rows.push({ measure: `page source, ${count} nodes`, instant: `${source.toFixed(2)} ms (${(source / json).toFixed(1)}x)`, realistic: null, baseline: `JSON.stringify ${json.toFixed(3)} ms`, target: "", pass: null });
  }
  emitReport("webdriver-locators", rows, details);
}

main();
