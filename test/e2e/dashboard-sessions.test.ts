/// <reference lib="dom" />
/**
 * Recorded test sessions on the dashboard, in a real browser (Debian's
 * Chromium driven by playwright-core) against a coordinator and an agent as
 * separate processes, a private adb server and a simulated phone. Steps are
 * recorded by the real CLI run with FARM_SESSION. Screenshots of the pages
 * go to test-artifacts/dashboard-sessions/.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice, type AdbServer } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

const artifacts = fileURLToPath(new URL("../../test-artifacts/dashboard-sessions/", import.meta.url));
/** Live updates show within this. */
const LIVE_MS = 5_000;

let adb: AdbServer;
let lab: SplitFarm;
let userEnv: NodeJS.ProcessEnv;
let url: string;
let browser: Browser;
let page: Page;
let phone: SimDevice;
let serial = "";

interface UiNode {
  type: string;
  text: string;
  contentDesc: string;
  clickable: boolean;
  bounds: { left: number; top: number; right: number; bottom: number };
  children: UiNode[];
}

const shot = (name: string) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
const step = (seq: number) => page.locator(`li.step[data-seq="${seq}"]`);
const listRow = (id: string) => page.locator(`tr[data-test-session="${id}"]`);
/** Whether an image in the page has loaded (lazy images are scrolled to first). */
const loaded = async (img: ReturnType<Page["locator"]>) => {
  await img.scrollIntoViewIfNeeded();
  return img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth > 0);
};

async function run(args: string[], env: NodeJS.ProcessEnv): Promise<Record<string, unknown>> {
  const r = await farm(args, env);
  expect(r.code, `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(0);
  return r.json;
}

/** A lease on the phone and a session under it: the environment the CLI records steps with. */
async function startSession(args: string[]): Promise<{ id: string; env: NodeJS.ProcessEnv; physicalId: string; release: () => Promise<unknown> }> {
  const lease = (await run(["lease", "acquire", "--device", serial], userEnv))["lease"] as { token: string; physicalId: string };
  const leaseEnv = { ...userEnv, FARM_LEASE: lease.token };
  const session = (await run(["session", "start", "--device", serial, ...args], leaseEnv))["session"] as { sessionId: string };
  return { id: session.sessionId, env: { ...leaseEnv, FARM_SESSION: session.sessionId }, physicalId: lease.physicalId, release: () => run(["lease", "release"], leaseEnv) };
}

/** The launcher's clickable elements with a label, from a UI tree read. */
function clickables(roots: UiNode[]): UiNode[] {
  const out: UiNode[] = [];
  const walk = (n: UiNode) => {
    if (n.clickable && (n.text || n.contentDesc)) out.push(n);
    n.children.forEach(walk);
  };
  roots.forEach(walk);
  return out;
}

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  lab = await startSplitFarm("dashboard-sessions", { agentName: "lab-s" });
  ({ adb, url } = lab);
  const token = String((await farm(["token", "create", "--kind", "user", "--name", "alice"], lab.env)).json["token"]);
  userEnv = { ...lab.env, FARM_TOKEN: token };
  phone = new SimDevice({ serialno: "TSESS001" });
  serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
  page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  page.setDefaultTimeout(10_000);
  // The device is usable (identity read) before a lease on it can be taken.
  await waitFor(`${serial} in farm devices`, async () => {
    const list = ((await farm(["devices"], userEnv)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
    return list.some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId) ? true : undefined;
  }, { timeoutMs: 30_000 });
  await page.goto(`${url}/dashboard/`);
  await page.getByLabel("User token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#nav").waitFor({ state: "visible" });
});

afterAll(async () => {
  await browser?.close();
  await phone?.close();
  await lab?.stop();
});

describe("dashboard: recorded test sessions", () => {
  let sessionId = "";
  let physicalId = "";
  /** The first session's CLI environment (its lease and FARM_SESSION), for the cases after the first. */
  let sessionEnv: NodeJS.ProcessEnv = {};
  let release: () => Promise<unknown> = async () => undefined;

  it("lists a session live with its action count; its page shows the timeline, before/after screenshots, a UI tree only for the UI-tree read, no OCR with OCR off", async () => {
    await page.getByRole("link", { name: "Test sessions" }).click();
    await expect.poll(() => page.locator("h1").textContent()).toBe("Test sessions");
    const s = await startSession(["--name", "checkout flow", "--context-json", "{\"build\":\"1.2.3\",\"branch\":\"main\"}"]);
    ({ id: sessionId, physicalId, env: sessionEnv, release } = s);
    // Started from the CLI: the row shows up without a reload.
    await expect.poll(() => listRow(sessionId).locator("[data-cell=\"status\"]").textContent(), { timeout: LIVE_MS }).toBe("running");
    expect(await listRow(sessionId).locator("[data-cell=\"user\"]").textContent()).toBe("alice");
    expect(await listRow(sessionId).locator("[data-cell=\"device\"]").textContent()).toContain(serial);
    expect(await listRow(sessionId).locator("[data-cell=\"actions\"]").textContent()).toBe("0");

    // Step 1: a UI tree read; step 2: a tap on a launcher icon (the scene changes).
    const tree = await run(["ui", "tree", "--device", serial], s.env);
    const icons = clickables(tree["roots"] as UiNode[]);
    expect(icons.length).toBeGreaterThan(0);
    const icon = icons.find((n) => /settings/i.test(n.text || n.contentDesc)) ?? (icons[0] as UiNode);
    const x = Math.round((icon.bounds.left + icon.bounds.right) / 2);
    const y = Math.round((icon.bounds.top + icon.bounds.bottom) / 2);
    await run(["input", "tap", String(x), String(y), "--device", serial], s.env);
    await expect.poll(() => listRow(sessionId).locator("[data-cell=\"actions\"]").textContent(), { timeout: LIVE_MS }).toBe("2");
    await shot("test-sessions");

    await listRow(sessionId).getByRole("link").click();
    await expect.poll(() => page.locator("h1").textContent()).toBe("Session: checkout flow");
    expect(await page.locator(".session-facts [data-cell=\"user\"]").textContent()).toBe("alice");
    expect(await page.locator(".session-facts pre.context").textContent()).toContain("\"build\": \"1.2.3\"");
    await expect.poll(() => page.locator("li.step").count()).toBe(2);
    expect(await step(1).getAttribute("data-action")).toBe("ui-tree");
    expect(await step(2).getAttribute("data-action")).toBe("tap");

    // The tap: two screenshots side by side, of different screens.
    const before = step(2).locator("[data-shot=\"before\"] img");
    const after = step(2).locator("[data-shot=\"after\"] img");
    await expect.poll(() => loaded(before), { timeout: 10_000 }).toBe(true);
    await expect.poll(() => loaded(after), { timeout: 10_000 }).toBe(true);
    const [shaBefore, shaAfter] = [await before.getAttribute("data-sha256"), await after.getAttribute("data-sha256")];
    expect(shaBefore).toMatch(/^[0-9a-f]{64}$/);
    expect(shaAfter).toMatch(/^[0-9a-f]{64}$/);
    expect(shaBefore).not.toBe(shaAfter);
    const [bb, ab] = [await before.boundingBox(), await after.boundingBox()];
    // Side by side: the same row, before on the left.
    expect(bb && ab && Math.abs(bb.y - ab.y) < 2 && bb.x + bb.width <= ab.x).toBe(true);
    expect(await step(2).locator(".step-result [data-cell=outcome]").textContent()).toBe("ok");
    expect(await step(2).locator(".step-head .description").textContent()).toContain(`${x}`);
    expect(await step(2).locator("details.arguments pre").textContent()).toContain(String(x));
    // Not a UI-tree read: no UI-tree section. OCR is off: no OCR list, not even a note.
    expect(await step(2).locator(".ui-tree-section").count()).toBe(0);
    expect(await page.locator(".ocr-list, [data-ocr]").count()).toBe(0);

    // The UI-tree read: a collapsible tree of its nodes, the raw JSON a click away.
    const section = step(1).locator(".ui-tree-section");
    expect(await section.count()).toBe(1);
    await section.scrollIntoViewIfNeeded();
    expect(await section.locator(".ui-node").count()).toBeGreaterThan(3);
    const label = icon.text || icon.contentDesc;
    const node = section.locator(".ui-node", { has: page.locator(".node-label", { hasText: label }) }).last();
    expect(await node.locator(".node-bounds").first().textContent()).toBe(`[${icon.bounds.left},${icon.bounds.top}][${icon.bounds.right},${icon.bounds.bottom}]`);
    const closed = await section.locator("details.ui-node:not([open])").first().elementHandle();
    expect(closed).not.toBeNull();
    expect(await closed!.evaluate((el: HTMLDetailsElement) => el.querySelector(".ui-node")?.checkVisibility())).toBe(false);
    await (await closed!.$(":scope > summary"))!.click();
    await expect.poll(() => closed!.evaluate((el: HTMLDetailsElement) => el.open && el.querySelector(".ui-node")?.checkVisibility())).toBe(true);
    const raw = section.locator("details.raw");
    expect(await raw.locator("pre").isVisible()).toBe(false);
    await raw.locator("summary").click();
    await expect.poll(() => raw.locator("pre").isVisible()).toBe(true);
    // The JSON is written on the details' toggle event, a task after the click: the box can be visible before it is filled.
    await expect.poll(async () => (await raw.locator("pre").textContent()) ?? "").not.toBe("");
    const json = JSON.parse((await raw.locator("pre").textContent()) ?? "{}") as { roots?: unknown[]; nodeCount?: number };
    expect(json.roots?.length).toBeGreaterThan(0);
    expect(json.nodeCount).toBe(tree["nodeCount"]);
    await shot("test-session");
  });

  it("adds steps live while the page is open, renders a legacy (version 1) record after-only, and follows the session's end", async () => {
    await page.goto(`${url}/dashboard/#/test-sessions/${sessionId}`);
    await expect.poll(() => page.locator("li.step").count()).toBe(2);
    await run(["input", "key", "KEYCODE_HOME", "--device", serial], sessionEnv);
    await expect.poll(() => step(3).getAttribute("data-action"), { timeout: LIVE_MS }).toBe("key");
    await expect.poll(() => page.locator(".session-facts [data-cell=\"actions\"]").textContent(), { timeout: LIVE_MS }).toBe("3");
    await expect.poll(() => loaded(step(3).locator("[data-shot=\"after\"] img")), { timeout: 10_000 }).toBe(true);

    // A failed action is a step too: its error, and the failed count.
    const missing = await farm(["input", "tap", "--text", "No such button", "--device", serial], sessionEnv);
    expect(missing.code).not.toBe(0);
    const code = String(missing.json["code"]);
    await expect.poll(() => step(4).locator(".step-result [data-cell=outcome]").textContent(), { timeout: LIVE_MS }).toBe("failed");
    expect(await step(4).locator(".step-error").textContent()).toContain(code);
    expect(await step(4).getAttribute("class")).toContain("step-failed");
    await expect.poll(() => page.locator(".session-facts [data-cell=\"actions\"]").textContent(), { timeout: LIVE_MS }).toBe("4 (1 failed)");

    // A still capture in a session is stored as a version 1 record: one screenshot, shown as "after".
    await run(["evidence", "capture", "--device", serial], sessionEnv);
    const legacy = step(5);
    await expect.poll(() => legacy.getAttribute("data-record-version"), { timeout: LIVE_MS }).toBe("1");
    expect(await legacy.locator("[data-shot=\"before\"]").count()).toBe(0);
    expect(await legacy.locator(".legacy-note").textContent()).toContain("Legacy record");
    await expect.poll(() => loaded(legacy.locator("[data-shot=\"after\"] img")), { timeout: 10_000 }).toBe(true);
    expect(await legacy.locator(".step-head .outcome").count()).toBe(0);
    expect(await legacy.locator(".ui-tree-section").count()).toBe(0);
    await shot("test-session-live");

    // Further evidence of a step is listed with where it came from, and opens as the stored file.
    await run(["shell", "--device", serial, "--capture", "deviceLog", "--", "log", "-t", "dash", "logged-during-the-step"], sessionEnv);
    const logLink = step(6).locator("[data-artifact=\"device.log\"] a");
    await expect.poll(() => logLink.count(), { timeout: LIVE_MS }).toBe(1);
    expect(await step(6).locator("[data-artifact=\"device.log\"]").textContent()).toContain("deviceLog.around from adb");
    const body = await page.evaluate(async (href) => (await fetch(href, { credentials: "same-origin" })).text(), (await logLink.getAttribute("href")) as string);
    expect(body).toContain("dash: logged-during-the-step");

    await run(["session", "end", "--status", "passed"], sessionEnv);
    await expect.poll(() => page.locator(".session-facts [data-cell=\"status\"]").textContent(), { timeout: LIVE_MS }).toBe("passed");
    await release();
  });

  it("filters the list, and links to sessions from the device page and the activity log", async () => {
    await page.goto(`${url}/dashboard/#/test-sessions`);
    await expect.poll(() => listRow(sessionId).locator("[data-cell=\"status\"]").textContent()).toBe("passed");
    expect(await listRow(sessionId).locator("[data-cell=\"actions\"]").textContent()).toBe("6 (1 failed)");
    await page.locator("#ts-status").selectOption("running");
    await expect.poll(() => listRow(sessionId).count()).toBe(0);
    await page.locator("#ts-status").selectOption("passed");
    await expect.poll(() => listRow(sessionId).count()).toBe(1);
    await page.locator("#ts-user").fill("bob");
    await expect.poll(() => listRow(sessionId).count()).toBe(0);
    await page.locator("#ts-user").fill("ali");
    await page.locator("#ts-device").fill(serial);
    await expect.poll(() => listRow(sessionId).count()).toBe(1);
    await page.locator("#ts-device").fill("no-such-device");
    await expect.poll(() => listRow(sessionId).count()).toBe(0);

    await page.goto(`${url}/dashboard/#/devices/${encodeURIComponent(physicalId)}`);
    const onDevice = page.locator(`#device-test-sessions tr[data-test-session="${sessionId}"]`);
    await expect.poll(() => onDevice.count(), { timeout: 10_000 }).toBe(1);
    await onDevice.getByRole("link").click();
    await expect.poll(() => page.locator("h1").textContent()).toBe("Session: checkout flow");

    await page.goto(`${url}/dashboard/#/activity`);
    const started = page.locator("tbody tr", { hasText: "startSession" }).first();
    await started.locator(`a[data-session-link="${sessionId}"]`).click();
    await expect.poll(() => page.locator("h1").textContent()).toBe("Session: checkout flow");
    await expect.poll(() => page.locator("li.step").count()).toBe(6);
  });

  it("with OCR on, lists the words of the before screenshot once read and outlines one on hover", async () => {
    const s = await startSession(["--name", "ocr run", "--ocr"]);
    await page.goto(`${url}/dashboard/#/test-sessions/${s.id}`);
    await expect.poll(() => page.locator("h1").textContent()).toBe("Session: ocr run");
    // On the launcher, whose icons carry labels.
    await run(["input", "key", "KEYCODE_HOME", "--device", serial], s.env);
    await expect.poll(() => step(1).count(), { timeout: LIVE_MS }).toBe(1);
    const rows = step(1).locator(".ocr-list tbody tr");
    // Tesseract in the coordinator: the first read starts a worker.
    await expect.poll(() => rows.count(), { timeout: 45_000 }).toBeGreaterThan(0);
    const first = rows.first();
    expect(await first.locator("[data-cell=\"confidence\"]").textContent()).toMatch(/^\d+%$/);
    const bounds = /^\[(\d+),(\d+)\]\[(\d+),(\d+)\]$/.exec((await first.locator("[data-cell=\"bounds\"]").textContent()) ?? "");
    expect(bounds).not.toBeNull();
    const [left, top, right, bottom] = bounds!.slice(1).map(Number) as [number, number, number, number];
    const img = step(1).locator("[data-shot=\"before\"] img");
    await expect.poll(() => loaded(img), { timeout: 10_000 }).toBe(true);
    const box = step(1).locator(".ocr-box");
    expect(await box.isVisible()).toBe(false);
    await first.hover();
    await expect.poll(() => box.isVisible()).toBe(true);
    // The outline sits on the word's pixels, scaled to the image as displayed.
    const natural = await img.evaluate((el: HTMLImageElement) => ({ w: el.naturalWidth, h: el.naturalHeight }));
    const ib = (await img.boundingBox())!;
    const bb = (await box.boundingBox())!;
    const sx = ib.width / natural.w;
    const sy = ib.height / natural.h;
    // Within 3 px (the image's 1 px border and the outline's 2 px).
    expect(Math.abs(bb.x - (ib.x + left * sx))).toBeLessThan(3);
    expect(Math.abs(bb.y - (ib.y + top * sy))).toBeLessThan(3);
    expect(Math.abs(bb.width - (right - left) * sx)).toBeLessThan(4);
    expect(Math.abs(bb.height - (bottom - top) * sy)).toBeLessThan(4);
    await shot("test-session-ocr");
    await page.mouse.move(0, 0);
    await expect.poll(() => box.isVisible()).toBe(false);

    // A screen without text (the display off, all black): OCR runs, finds nothing, and the step renders without an OCR list.
    await run(["input", "key", "KEYCODE_SLEEP", "--device", serial], s.env);
    await run(["input", "key", "KEYCODE_SLEEP", "--device", serial], s.env);
    await expect.poll(() => step(3).count(), { timeout: LIVE_MS }).toBe(1);
    await expect.poll(() => step(3).locator("[data-ocr=\"empty\"]").count(), { timeout: 45_000 }).toBe(1);
    expect(await step(3).locator(".ocr-list").count()).toBe(0);
    expect(await step(3).locator("[data-shot=\"before\"] img").count()).toBe(1);
    await run(["input", "key", "KEYCODE_WAKEUP", "--device", serial], s.env);
    await run(["session", "end"], s.env);
    await s.release();
  });
});
