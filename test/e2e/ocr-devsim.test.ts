/**
 * The coordinator's OCR pool (real tesseract.js, data from node_modules) on
 * screens the device simulator renders: the words of the labels in the UI
 * tree are found, with bounds inside the views that show them.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { OcrPool, type OcrObservation } from "@farm/coordinator/sessions/ocr/ocr-pool";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEVICE_PROFILES, DeviceState, defaultProperties, type Bounds, type UiNode } from "../devsim/index.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let phone: DeviceState;
let pool: OcrPool;

beforeAll(async () => {
  dir = await makeTempDir("ocr-devsim");
  const profile = DEVICE_PROFILES[0]!; // 1080x2400 at 420 dpi
  phone = new DeviceState(defaultProperties(profile, "OCR0001"), undefined, { width: profile.width, height: profile.height, density: profile.density });
  pool = new OcrPool({ workers: 1, maxQueue: 4 });
});

afterAll(async () => {
  await pool?.close();
  await phone?.dispose();
  await dir?.remove();
});

interface Label {
  text: string;
  bounds: Bounds;
  /** Drawn on a coloured toolbar. */
  onToolbar: boolean;
}

/** Views with text, as `uiautomator dump` would list them. */
function labels(node: UiNode, onToolbar = false): Label[] {
  const here = onToolbar || node.resourceId.endsWith(":id/toolbar");
  const own = node.text.trim() ? [{ text: node.text, bounds: node.bounds, onToolbar: here }] : [];
  return [...own, ...node.children.flatMap((child) => labels(child, here))];
}

/** Overlaps the view, and its centre lies in the view grown by a few pixels. */
function inside(found: OcrObservation["bounds"], view: Bounds, slack = 4): boolean {
  const overlap = Math.max(0, Math.min(found.right, view.right) - Math.max(found.left, view.left)) * Math.max(0, Math.min(found.bottom, view.bottom) - Math.max(found.top, view.top));
  const cx = (found.left + found.right) / 2;
  const cy = (found.top + found.bottom) / 2;
  return overlap > 0 && cx >= view.left - slack && cx <= view.right + slack && cy >= view.top - slack && cy <= view.bottom + slack;
}

/** Renders the phone's screen to a PNG file, OCRs it, and returns the tree's labels with what was found. */
async function ocrScreen(name: string): Promise<{ labels: Label[]; observations: OcrObservation[] }> {
  const tree = phone.screen.tree();
  if (!tree) throw new Error("screen is off");
  const path = join(dir.path, `${name}.png`);
  await writeFile(path, await phone.renderer.png());
  const { observations } = await pool.recognize(path);
  return { labels: labels(tree), observations };
}

function expectFound(label: Label, observations: OcrObservation[]): void {
  for (const word of label.text.split(/\s+/)) {
    const found = observations.filter((o) => o.text === word);
    expect(found.length, `"${word}" of "${label.text}" among ${JSON.stringify(observations.map((o) => o.text))}`).toBeGreaterThan(0);
    expect(
      found.some((o) => inside(o.bounds, label.bounds)),
      `"${word}" at ${JSON.stringify(found.map((o) => o.bounds))}, view ${JSON.stringify(label.bounds)}`,
    ).toBe(true);
    for (const o of found) expect(o.confidence > 0 && o.confidence <= 1, `${word} confidence ${o.confidence}`).toBe(true);
  }
}

describe("OCR on devsim screens", () => {
  it("finds every launcher icon's label inside its icon", async () => {
    phone.screen.home();
    const { labels, observations } = await ocrScreen("launcher");
    expect(labels.map((l) => l.text)).toEqual(expect.arrayContaining(["Settings", "Farm Demo"]));
    for (const label of labels) expectFound(label, observations);
  }, 30_000);

  it("finds the Settings list's rows inside their views", async () => {
    expect(phone.screen.start("com.android.settings")).toBeUndefined();
    const { labels, observations } = await ocrScreen("settings");
    const rows = labels.filter((l) => !l.onToolbar);
    expect(rows.map((l) => l.text)).toEqual(["Network & internet", "Display", "About phone"]);
    // The toolbar title is left out: devsim draws it dark grey on slate
    // (#202124 on #455a64, contrast about 2.4:1), which tesseract's global
    // Otsu threshold turns into one dark bar; real toolbars use white text.
    for (const label of rows) expectFound(label, observations);
    // Reading order follows the list.
    const words = observations.map((o) => o.text).filter((t) => ["Network", "Display", "About"].includes(t));
    expect(words).toEqual(["Network", "Display", "About"]);
  }, 30_000);
});
