/**
 * UI trees and taps by element end to end: `farm coordinator` and `farm
 * agent` as separate processes, a real adb server, one simulated phone
 * (test/devsim: its launcher, Settings and the demo app with its SDK), and
 * the real CLI.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { exitCodeFor } from "@farm/shared/error-codes";
import { adbConnect, runAdb, SimDevice } from "../devsim/index.js";
import { farm, waitFor, type CliResult } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

const DEMO = "com.example.farmdemo";

interface Rect {
  left: number;
  top: number;
  right: number;
  bottom: number;
}
interface Element {
  type: string;
  text: string;
  resourceId: string;
  contentDesc: string;
  bounds: Rect;
  enabled: boolean;
  clickable: boolean;
  focused: boolean;
  confidence?: number;
  packageName: string;
  children: Element[];
}
interface Tree {
  ok: true;
  source: string;
  nodeCount: number;
  roots: Element[];
}
interface ActionRecord {
  actionId: string;
  kind: string;
  requestJson: string;
  state: string;
}

let lab: SplitFarm;
let phone: SimDevice;
let serial: string;
/** Admin CLI environment holding the phone's lease. */
let env: NodeJS.ProcessEnv;

const flat = (roots: Element[]): Element[] => roots.flatMap((r) => [r, ...flat(r.children)]);

async function tree(args: string[] = []): Promise<Tree> {
  const r = await farm(["ui", "tree", "--device", serial, ...args], env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  const t = r.json as unknown as Tree;
  expect(t.nodeCount).toBe(flat(t.roots).length);
  return t;
}

const texts = async () => flat((await tree()).roots).map((e) => e.text).filter(Boolean);
const tap = (...args: string[]) => farm(["input", "--device", serial, "tap", ...args], env);

/** The phone's recent actions on this agent, newest first. */
async function recent(): Promise<ActionRecord[]> {
  const r = await farm(["device", "ownership", "status", "--device", serial], env);
  return ((r.json["ownership"] as { recent: ActionRecord[] } | undefined)?.recent ?? []);
}

/** Back to the launcher (a key event, outside what is under test). */
async function home(): Promise<void> {
  const r = await farm(["input", "--device", serial, "key", "KEYCODE_HOME"], env);
  expect(r.code, r.stdout).toBe(0);
  await waitFor("the launcher", async () => ((await tree()).roots[0]?.packageName === "com.android.launcher3" ? true : undefined));
}

function expectRefused(r: CliResult, code: string, field: string): string {
  expect(r.code, r.stdout + r.stderr).toBe(exitCodeFor(code));
  expect(r.json).toMatchObject({ ok: false, code, field, dispatched: false, ambiguous: false });
  return String(r.json["message"]);
}

beforeAll(async () => {
  lab = await startSplitFarm("ui-tree");
  // Debuggable, so run-as reaches the demo app's SDK descriptor.
  phone = new SimDevice({ serialno: "UI000001", props: { "ro.debuggable": "1" } });
  serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor("the phone in farm devices", async () => {
    const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string }[];
    return list.some((d) => d.serial === serial && d.state === "device") ? true : undefined;
  });
  const lease = await farm(["lease", "acquire", "--device", serial], lab.env);
  expect(lease.code, lease.stdout + lease.stderr).toBe(0);
  env = { ...lab.env, FARM_LEASE: String((lease.json["lease"] as { token: string }).token) };
}, 120_000);

// Each test starts on the launcher: one that fails part-way leaves the
// screen wherever it was, and that must not fail the tests after it.
afterEach(async (ctx) => {
  if (ctx.task.result?.state === "fail") await home();
});

afterAll(async () => {
  await phone?.close();
  await lab?.stop();
});

describe("farm ui tree", () => {
  it("returns the launcher's elements from UIAutomator, normalized, with bounds and flags", async () => {
    const t = await tree();
    expect(t.source).toBe("uiautomator");
    expect(t.roots).toHaveLength(1);
    expect(t.roots[0]).toMatchObject({ type: "android.widget.FrameLayout", packageName: "com.android.launcher3", bounds: { left: 0, top: 0, right: 1080, bottom: 2400 }, enabled: true, clickable: false });
    const all = flat(t.roots);
    expect(all.find((e) => e.resourceId === "android:id/content")?.bounds).toEqual({ left: 0, top: 63, right: 1080, bottom: 2400 });
    // One icon per launchable app: text and description are the label.
    expect(all.find((e) => e.text === "Settings")).toMatchObject({
      type: "android.widget.TextView",
      contentDesc: "Settings",
      clickable: true,
      enabled: true,
      focused: false,
      bounds: { left: 21, top: 189, right: 249, bottom: 420 },
      children: [],
    });
    expect(all.find((e) => e.text === "Farm Demo")).toMatchObject({ contentDesc: "Farm Demo", bounds: { left: 291, top: 189, right: 519, bottom: 420 } });
    // UIAutomator gives no confidence: it stays unset.
    expect(all.every((e) => !("confidence" in e))).toBe(true);
  });

  it("prints an indented tree for people", async () => {
    const r = await farm(["ui", "tree", "--device", serial], { ...env, FARM_OUTPUT: "pretty" });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe("uiautomator: 4 elements");
    expect(lines[1]).toBe("android.widget.FrameLayout [0,0][1080,2400]");
    expect(lines[2]).toBe("  android.widget.LinearLayout id=android:id/content [0,63][1080,2400]");
    expect(lines).toContain("    android.widget.TextView \"Settings\" desc=\"Settings\" [21,189][249,420] clickable");
  });

  it("reads the demo app's own tree from its SDK with --app-package", async () => {
    await runAdb(lab.adb.port, ["-s", serial, "shell", `am start -n ${DEMO}/.MainActivity`]);
    // The SDK publishes its endpoint once the app has started.
    const t = await waitFor("the demo app's SDK tree", async () => {
      const r = await farm(["ui", "tree", "--device", serial, "--app-package", DEMO], env);
      // Thrown so that a time-out names the last answer.
      if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stdout.trim()} ${r.stderr.trim()}`);
      return r.json as unknown as Tree;
    });
    expect(t.source).toBe("app-sdk");
    const all = flat(t.roots);
    expect(all.every((e) => e.packageName === DEMO)).toBe(true);
    expect(all.find((e) => e.resourceId === `${DEMO}:id/next`)).toMatchObject({ type: "android.widget.Button", text: "Next", enabled: true, bounds: { left: 42, top: 693, right: 1038, bottom: 840 } });
    expect(all.find((e) => e.resourceId === `${DEMO}:id/delete`)).toMatchObject({ text: "Delete account", enabled: false });
    // The same screen through UIAutomator has the same elements.
    const ui = flat((await tree()).roots);
    expect(ui.map((e) => [e.type, e.text, e.resourceId, e.bounds])).toEqual(all.map((e) => [e.type, e.text, e.resourceId, e.bounds]));

    const bad = await farm(["ui", "tree", "--device", serial, "--app-package", "not a package"], env);
    expect(bad.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "app-package" });
    const absent = await farm(["ui", "tree", "--device", serial, "--app-package", "com.example.absent"], env);
    expect(absent.json).toMatchObject({ ok: false, code: "bridge_endpoint_discovery_failed" });
    await home();
  });

  it("says UI_TREE_FAILED for a locked screen, without unlocking it", async () => {
    phone.state.display.locked = true;
    try {
      const r = await farm(["ui", "tree", "--device", serial], env);
      expect(r.json).toMatchObject({ ok: false, code: "UI_TREE_FAILED" });
      expect(String(r.json["message"])).toContain("DEVICE_LOCKED");
      expect(phone.state.display.locked).toBe(true);
      // A tap by element reads the tree first: refused, nothing sent, nothing journaled.
      const before = await recent();
      const tapped = await tap("--text", "Settings");
      expect(tapped.json).toMatchObject({ ok: false, code: "UI_TREE_FAILED", dispatched: false, ambiguous: false });
      expect(await recent()).toEqual(before);
    } finally {
      phone.state.display.locked = false;
    }
  });
});

describe("farm input tap by element", () => {
  it("taps the element's centre, journals the selector and bounds, and the screen changes as the scene defines", async () => {
    const r = await tap("--text", "Settings");
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.json).toMatchObject({
      ok: true,
      dispatched: true,
      ambiguous: false,
      element: {
        selector: { text: "Settings" },
        element: { type: "android.widget.TextView", text: "Settings", contentDesc: "Settings", bounds: { left: 21, top: 189, right: 249, bottom: 420 }, children: [] },
        x: 135,
        y: 304,
      },
    });
    const actionId = String(r.json["actionId"]);
    // The launcher icon started Settings.
    const all = flat((await tree()).roots);
    expect(all.map((e) => e.text)).toEqual(expect.arrayContaining(["Settings", "Network & internet", "Display", "About phone"]));
    expect(all.every((e) => e.packageName === "com.android.settings")).toBe(true);
    // The journal names the target, not only the point.
    const record = (await recent()).find((a) => a.actionId === actionId);
    expect(record).toMatchObject({ kind: "input", state: "settled" });
    expect(JSON.parse(record?.requestJson ?? "{}")).toEqual({
      kind: "tap",
      x: 135,
      y: 304,
      element: { selector: { text: "Settings" }, type: "android.widget.TextView", text: "Settings", resourceId: "", contentDesc: "Settings", bounds: "[21,189][249,420]" },
    });

    // Pretty output says what was tapped; a row's title navigates to its screen.
    const pretty = await farm(["input", "--device", serial, "tap", "--text", "Display"], { ...env, FARM_OUTPUT: "pretty" });
    expect(pretty.code, pretty.stderr).toBe(0);
    expect(pretty.stdout).toMatch(/^tapped android\.widget\.TextView "Display" at \(613, 472\) \[189,399\]\[1038,546\] \(action [0-9a-f-]+\)\n$/);
    expect(await texts()).toEqual(expect.arrayContaining(["Dark theme", "Auto-rotate screen"]));

    // By resource id and by content description too.
    const back = await farm(["input", "--device", serial, "key", "KEYCODE_BACK"], env);
    expect(back.code).toBe(0);
    const about = await tap("--id", "com.android.settings:id/about");
    expect(about.json).toMatchObject({ ok: true, element: { selector: { resourceId: "com.android.settings:id/about" }, x: 540, y: 640 } });
    expect((await texts()).some((t) => t.startsWith("Model: "))).toBe(true);
    await home();
    const demo = await tap("--desc", "Farm Demo");
    expect(demo.json).toMatchObject({ ok: true, element: { selector: { contentDesc: "Farm Demo" }, element: { text: "Farm Demo" } } });
    expect(await texts()).toContain("Sign in");
    const next = await tap("--id", `${DEMO}:id/next`);
    expect(next.code, next.stdout).toBe(0);
    expect(await texts()).toContain("Welcome, guest!");
    await home();
  });

  it("refuses a selector that matches nothing with ELEMENT_NOT_FOUND: nothing sent, nothing journaled", async () => {
    const before = await recent();
    const r = await tap("--text", "Bluetooth");
    const message = expectRefused(r, "ELEMENT_NOT_FOUND", "text");
    expect(message).toContain("text \"Bluetooth\"");
    // A near miss is named.
    const id = await tap("--id", "settings");
    expect(expectRefused(id, "ELEMENT_NOT_FOUND", "id")).toContain("no element on the screen has resource id \"settings\"");
    expect(await recent()).toEqual(before);
    expect(await texts()).toContain("Farm Demo");

    const pretty = await farm(["input", "--device", serial, "tap", "--desc", "Nope"], { ...env, FARM_OUTPUT: "pretty" });
    expect(pretty.code).toBe(1);
    expect(pretty.stderr).toMatch(/^error: no element on the screen has content description "Nope" .*\[ELEMENT_NOT_FOUND, field desc\]\n$/);
  });

  it("refuses a selector that matches several with ELEMENT_AMBIGUOUS listing the candidates: nothing sent, nothing journaled", async () => {
    await tap("--text", "Settings");
    const before = await recent();
    const r = await tap("--id", "android:id/title");
    const message = expectRefused(r, "ELEMENT_AMBIGUOUS", "id");
    expect(message).toMatch(/^3 elements on the screen have resource id "android:id\/title"/);
    expect(message).toContain("android.widget.TextView \"Network & internet\" id=android:id/title [189,231][1038,378]");
    expect(message).toContain("android.widget.TextView \"Display\" id=android:id/title [189,399][1038,546]");
    expect(message).toContain("android.widget.TextView \"About phone\" id=android:id/title [189,567][1038,714]");
    expect(await recent()).toEqual(before);
    // Still on Settings' main screen.
    expect(await texts()).toEqual(expect.arrayContaining(["Network & internet", "Display", "About phone"]));
    await home();
  });

  // The spellings' matrix is test/contract/input-refusals.test.ts; one of them through the real processes here.
  it("refuses a bad spelling before sending anything, and keeps tap X Y working", async () => {
    const before = await recent();
    const both = await tap("10", "20", "--text", "Settings");
    expectRefused(both, "INVALID_ARGUMENT", "tap");
    expect(await recent()).toEqual(before);

    // The old spelling: the Settings icon's centre.
    const xy = await tap("135", "304");
    expect(xy.code, xy.stdout).toBe(0);
    expect(xy.json["element"]).toBeUndefined();
    expect(await texts()).toContain("Network & internet");
    await home();
  });
});
