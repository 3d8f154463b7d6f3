/// <reference lib="dom" />
/**
 * The live screen on the dashboard's device page, in a real browser
 * (Debian's Chromium, WebCodecs decoding H.264) against `farm standalone`
 * and a simulated phone whose screenrecord streams H.264 through ffmpeg.
 * Screenshots go to test-artifacts/dashboard-screen/.
 */
import { mkdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient, ConnectError, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { chromium, type Browser, type Page } from "playwright-core";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LiveScreenService } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { toErrorReport } from "@farm/shared/errors";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdb, type SimDevice } from "../devsim/index.js";
import type { UiNode } from "../devsim/screen/ui-node.js";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

const artifacts = fileURLToPath(new URL("../../test-artifacts/dashboard-screen/", import.meta.url));

let lab: Lab;
let phone: SimDevice;
let serial = "";
let physicalId = "";
let aliceToken = "";
let bobToken = "";
let browser: Browser;

async function signedIn(token: string, viewport = { width: 1280, height: 900 }, phoneId = physicalId): Promise<Page> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  await page.goto(`${String(lab.standalone.ready["url"])}/dashboard/`);
  await page.getByLabel("User token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect.poll(() => page.locator("#nav").isVisible()).toBe(true);
  await page.goto(`${String(lab.standalone.ready["url"])}/dashboard/#/devices/${encodeURIComponent(phoneId)}`);
  return page;
}

function* walk(n: UiNode): Generator<UiNode> {
  yield n;
  for (const c of n.children) yield* walk(c);
}

/** The element showing this text, the clickable one first (an icon rather than its label). */
const nodeWithText = (text: string) => {
  const all = [...walk(phone.state.screen.tree() as UiNode)].filter((n) => n.text === text);
  return all.find((n) => n.clickable) ?? all[0];
};

/** Where on the page's canvas a labelled element of the phone's screen is. */
async function canvasPointOf(page: Page, label: string): Promise<{ x: number; y: number }> {
  const node = nodeWithText(label);
  if (!node) throw new Error(`no ${label} on the devsim screen`);
  const display = phone.state.display.logicalSize;
  const box = await page.locator("canvas.live-screen").boundingBox();
  if (!box) throw new Error("no canvas");
  const cx = (node.bounds.left + node.bounds.right) / 2;
  const cy = (node.bounds.top + node.bounds.bottom) / 2;
  return { x: box.x + (cx / display.width) * box.width, y: box.y + (cy / display.height) * box.height };
}

/** A cheap fingerprint of what the canvas shows now. */
const canvasPixels = (page: Page) =>
  page.evaluate(() => {
    const c = document.querySelector("canvas.live-screen") as HTMLCanvasElement;
    const d = c.getContext("2d")?.getImageData(0, 0, c.width, c.height).data;
    if (!d) return { lit: 0, sum: 0 };
    let lit = 0;
    let sum = 0;
    for (let i = 0; i < d.length; i += 4 * 97) {
      const v = (d[i] ?? 0) + (d[i + 1] ?? 0) + (d[i + 2] ?? 0);
      if (v > 30) lit++;
      sum = (sum * 31 + v) % 1_000_000_007;
    }
    return { lit, sum };
  });

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  lab = await startLab("dashboard-screen");
  // A 720x1600 phone keeps encoding cheap.
  ({ device: phone, serial } = await lab.addDevice({ serialno: "DSCREEN01", profile: 3 }));
  const listed = ((await farm(["devices"], lab.env)).json["devices"] as { serial: string; properties: { physicalId: string } }[]).find((d) => d.serial === serial);
  physicalId = listed?.properties.physicalId ?? "";
  await farm(["token", "create", "--kind", "user", "--name", "alice"], lab.env).then((r) => (aliceToken = String(r.json["token"])));
  await farm(["token", "create", "--kind", "user", "--name", "bob"], lab.env).then((r) => (bobToken = String(r.json["token"])));
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await lab?.stop();
});

describe("the live screen on the device page", () => {
  it("shows the lease holder the screen live; a click on Settings opens Settings; others see who holds it; the lease's end stops it", async () => {
    const alice = await signedIn(aliceToken);
    await expect.poll(() => alice.locator("[data-cell=\"screen-status\"]").textContent()).toContain("Lease this phone");
    await alice.getByRole("button", { name: "Lease it for 30 minutes" }).click();

    // Frames arrive and are decoded: the stats line names H.264 and the canvas is lit.
    await expect.poll(() => alice.locator("[data-cell=\"screen-stats\"]").textContent(), { timeout: 20_000 }).toMatch(/H\.264/);
    await expect.poll(async () => (await canvasPixels(alice)).lit, { timeout: 10_000 }).toBeGreaterThan(100);
    await alice.screenshot({ path: join(artifacts, "home.png"), fullPage: true });
    const before = await canvasPixels(alice);

    // Bob sees who holds it, and no screen.
    const bob = await signedIn(bobToken);
    await expect.poll(() => bob.locator("[data-cell=\"screen-status\"]").textContent()).toContain("Leased by alice");
    expect(await bob.locator("canvas.live-screen").isHidden()).toBe(true);
    // Nor the holder's last capture of it: who holds it instead.
    await expect.poll(() => bob.locator("[data-cell=\"shot-leased\"]").textContent()).toBe("Leased by alice: its screen is theirs while they hold it.");

    // A click on the Settings icon is a routed tap at the right place.
    const at = await canvasPointOf(alice, "Settings");
    await alice.mouse.click(at.x, at.y);
    await expect.poll(() => phone.state.screen.focusedPackage, { timeout: 10_000 }).toBe("com.android.settings");
    await expect.poll(async () => (await canvasPixels(alice)).sum, { timeout: 10_000 }).not.toBe(before.sum);
    await alice.screenshot({ path: join(artifacts, "settings.png"), fullPage: true });
    const activity = await farm(["activity", "--device", serial], lab.env);
    expect(JSON.stringify(activity.json)).toContain("sendInput");

    // The page holds the lease token it took; releasing the lease stops the stream. Waited
    // on as events (the page's status, the coordinator's viewer count), never by a clock:
    // a loaded machine may take longer, and that is not a failure.
    const token = await alice.evaluate((key) => sessionStorage.getItem(key), `farm.lease.${physicalId}`);
    expect(token).toBeTruthy();
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: String(token) })).code).toBe(0);
    await expect.poll(() => alice.locator("[data-cell=\"screen-status\"]").textContent(), { timeout: 20_000 }).toMatch(/^Lease this phone/);
    await expect.poll(() => alice.locator("canvas.live-screen").isHidden(), { timeout: 20_000 }).toBe(true);
    // And no viewer is left on the coordinator: the stream itself ended, not just its canvas.
    const url = String(lab.standalone.ready["url"]);
    await expect.poll(async () => (await (await fetch(`${url}/metrics`)).text()).split("\n").find((l) => l.startsWith("farm_live_screen_viewers ")), { timeout: 20_000 }).toBe("farm_live_screen_viewers 0");
  });

  it("keeps the tab's lease token while a reloaded page is still reading its lists, so it drives the phone at once", async () => {
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], { ...lab.env, FARM_TOKEN: aliceToken });
    const token = String((acquired.json["lease"] as { token: string }).token);
    const alice = await signedIn(aliceToken);
    await alice.evaluate(([key, value]) => sessionStorage.setItem(key as string, value as string), [`farm.lease.${physicalId}`, token]);
    // A reload renders the device page before the lease list has arrived: on main that render forgot the token.
    await alice.reload();
    await expect.poll(() => alice.locator("[data-cell=\"screen-stats\"]").textContent(), { timeout: 20_000 }).toMatch(/H\.264/);
    // Compared, never printed: a failure must not put a token in the CI log.
    const stored = await alice.evaluate((key) => sessionStorage.getItem(key), `farm.lease.${physicalId}`);
    expect(stored === token ? "kept" : stored === null ? "forgotten" : "changed").toBe("kept");
    phone.state.screen.home();
    await expect.poll(() => nodeWithText("Settings") !== undefined).toBe(true);
    const at = await canvasPointOf(alice, "Settings");
    await alice.mouse.click(at.x, at.y);
    await expect.poll(() => phone.state.screen.focusedPackage, { timeout: 10_000 }).toBe("com.android.settings");
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: token })).code).toBe(0);
  });

  it("takes typing into a focused text field, fits a 375 px wide phone, and captures evidence of what is on screen", async () => {
    const alice = await signedIn(aliceToken, { width: 375, height: 812 });
    await alice.getByRole("button", { name: "Lease it for 30 minutes" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"screen-stats\"]").textContent(), { timeout: 20_000 }).toMatch(/H\.264/);
    const box = await alice.locator("canvas.live-screen").boundingBox();
    expect(box && box.x + box.width).toBeLessThanOrEqual(375);

    await alice.getByRole("button", { name: "Home" }).click();
    await expect.poll(() => phone.state.screen.focusedPackage, { timeout: 10_000 }).toBe("com.android.launcher3");
    await expect.poll(async () => nodeWithText("Farm Demo") !== undefined).toBe(true);
    // The buttons are under the phone: pressing one scrolled the page.
    await alice.evaluate(() => window.scrollTo(0, 0));
    let at = await canvasPointOf(alice, "Farm Demo");
    await alice.mouse.click(at.x, at.y);
    await expect.poll(() => nodeWithText("Your name") !== undefined, { timeout: 10_000 }).toBe(true);
    at = await canvasPointOf(alice, "Your name");
    await alice.mouse.click(at.x, at.y);
    await alice.keyboard.type("hello farm");
    await expect.poll(() => nodeWithText("hello farm") !== undefined, { timeout: 10_000 }).toBe(true);
    await alice.screenshot({ path: join(artifacts, "typed-375.png"), fullPage: true });

    // Turned to landscape: the stream restarts in the new shape and a click still lands where it is aimed.
    expect((await runAdb(lab.adb.port, ["-s", serial, "shell", "settings put system user_rotation 1"])).code).toBe(0);
    try {
      await expect.poll(() => alice.locator("[data-cell=\"screen-stats\"]").textContent(), { timeout: 10_000 }).toMatch(/^1600×720 /);
      await alice.getByRole("button", { name: "Home" }).click();
      await expect.poll(() => phone.state.screen.focusedPackage, { timeout: 10_000 }).toBe("com.android.launcher3");
      await alice.evaluate(() => window.scrollTo(0, 0));
      at = await canvasPointOf(alice, "Settings");
      await alice.mouse.click(at.x, at.y);
      await expect.poll(() => phone.state.screen.focusedPackage, { timeout: 10_000 }).toBe("com.android.settings");
      await alice.screenshot({ path: join(artifacts, "landscape-settings.png"), fullPage: true });
    } finally {
      await runAdb(lab.adb.port, ["-s", serial, "shell", "settings put system user_rotation 0"]);
    }

    await alice.getByRole("button", { name: "Capture evidence" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"screen-status\"]").textContent(), { timeout: 20_000 }).toMatch(/^Captured evidence [0-9a-f]{8}\.$/);

    // With a recorded session of hers running on the phone, what she does on the page becomes its steps.
    const token = String(await alice.evaluate((key) => sessionStorage.getItem(key), `farm.lease.${physicalId}`));
    const aliceEnv = { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: token, FARM_DEVICE: serial };
    const started = await farm(["session", "start", "--name", "from the page"], aliceEnv);
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const sessionId = String((started.json["session"] as { sessionId: string }).sessionId);
    await expect.poll(() => alice.locator("[data-cell=\"screen-session\"]").textContent(), { timeout: 5_000 }).toContain("from the page");
    await alice.getByRole("button", { name: "Back" }).click();
    await expect
      .poll(async () => JSON.stringify((await farm(["session", "show", sessionId], aliceEnv)).json["steps"] ?? []), { timeout: 15_000 })
      .toContain("KEYCODE_BACK");
    expect((await farm(["session", "end", "--session", sessionId, "--status", "passed"], aliceEnv)).code).toBe(0);

    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: token })).code).toBe(0);
  });

  it("refuses the screen and the controls to a user without the lease; an admin watches JPEG images from a phone without H.264", async () => {
    const acquired = await farm(["lease", "acquire", "--device", serial], { ...lab.env, FARM_TOKEN: aliceToken });
    const leaseToken = (acquired.json["lease"] as { token: string }).token;
    const as = (token: string): Interceptor => (next) => (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    };
    const url = String(lab.standalone.ready["url"]);
    const bob = createGrpcTransport({ baseUrl: url, interceptors: [as(bobToken)] });
    const watch = async () => {
      for await (const _ of createClient(LiveScreenService, bob).watchScreen({ target: { serial } })) return "watched";
      return "ended";
    };
    expect(toErrorReport(await watch().catch((e: unknown) => e))).toMatchObject({ code: "LEASE_HELD_BY_OTHER", message: expect.stringContaining("alice") });
    const tap = await createClient(DeviceService, bob).sendInput({ target: { serial }, kind: { case: "tap", value: { x: 10, y: 10 } } }).catch((e: unknown) => e);
    expect(tap).toBeInstanceOf(ConnectError);
    expect(toErrorReport(tap)).toMatchObject({ code: "LEASE_HELD_BY_OTHER", dispatched: false });

    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: leaseToken })).code).toBe(0);

    // A phone with no encoder: the admin's view falls back to images.
    const other = await lab.addDevice({ serialno: "DSCREEN02", profile: 3 });
    other.device.faults.set({ screenrecordFails: true });
    const otherId = ((await farm(["devices"], lab.env)).json["devices"] as { serial: string; properties: { physicalId: string } }[]).find((d) => d.serial === other.serial)?.properties.physicalId ?? "";
    const admin = await signedIn((await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim(), undefined, otherId);
    await expect.poll(() => admin.locator("[data-cell=\"screen-stats\"]").textContent(), { timeout: 30_000 }).toMatch(/JPEG images/);
    await expect.poll(async () => (await canvasPixels(admin)).lit, { timeout: 10_000 }).toBeGreaterThan(100);
    await admin.screenshot({ path: join(artifacts, "jpeg-fallback.png"), fullPage: true });
  });

  it("keeps a viewer that stops reading from growing the coordinator's memory: it restarts at key frames instead", async () => {
    const url = String(lab.standalone.ready["url"]);
    const adminToken = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    const metric = async (name: string) => {
      const line = (await (await fetch(`${url}/metrics`)).text()).split("\n").find((l) => l.startsWith(`${name} `));
      return line === undefined ? undefined : Number(line.split(" ")[1]);
    };
    const auth: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${adminToken}`);
      return next(req);
    };
    // A client with HTTP/2's default 64 KiB window, which reads the format and then nothing.
    const stop = new AbortController();
    const stalled = createClient(LiveScreenService, createGrpcTransport({ baseUrl: url, interceptors: [auth] })).watchScreen({ target: { serial } }, { signal: stop.signal })[Symbol.asyncIterator]();
    expect((await stalled.next()).value?.event?.kind.case).toBe("format");
    const resyncsBefore = (await metric("farm_live_screen_resyncs_total")) ?? 0;
    let flip = false;
    const driver = setInterval(() => {
      flip = !flip;
      if (flip) phone.state.screen.start("com.android.settings");
      else phone.state.screen.home();
    }, 50);
    try {
      await expect.poll(async () => ((await metric("farm_live_screen_resyncs_total")) ?? 0) > resyncsBefore, { timeout: 20_000, interval: 250 }).toBe(true);
      // What waits for it stays under its bound (4 MiB), however long it stalls.
      for (let i = 0; i < 4; i++) {
        expect(await metric("farm_live_screen_queued_bytes")).toBeLessThanOrEqual(4 * 1024 * 1024);
        await new Promise((r) => setTimeout(r, 500));
      }
    } finally {
      clearInterval(driver);
      stop.abort();
    }
  });
});
