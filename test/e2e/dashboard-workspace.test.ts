/// <reference lib="dom" />
/**
 * The device page as a workspace, in a real browser (Debian's Chromium)
 * against `farm standalone` and simulated phones: the 1280×800 layout, the
 * lease bar (lease, renew, release), the Apps tab (drag-and-drop install
 * through the dashboard's upload endpoint and InstallApp, launch, stop,
 * uninstall) and the device grid. Screenshots go to
 * test-artifacts/dashboard-workspace/.
 */
import { mkdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { request } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildSimApk, type SimDevice } from "../devsim/index.js";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

const artifacts = fileURLToPath(new URL("../../test-artifacts/dashboard-workspace/", import.meta.url));

let lab: Lab;
let url = "";
let phone: SimDevice;
let serial = "";
let physicalId = "";
const tokens: Record<string, string> = {};
let browser: Browser;

async function signedIn(who: string, hash: string, viewport = { width: 1280, height: 800 }): Promise<Page> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  await page.goto(`${url}/dashboard/`);
  await page.getByLabel("User token").fill(tokens[who] as string);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect.poll(() => page.locator("#nav").isVisible()).toBe(true);
  await page.goto(`${url}/dashboard/${hash}`);
  return page;
}

const devicePage = () => `#/devices/${encodeURIComponent(physicalId)}`;

/** Share of sampled canvas pixels near a colour (H.264 shifts colours a little). */
const canvasShare = (page: Page, rgb: [number, number, number]) =>
  page.evaluate((want) => {
    const c = document.querySelector("canvas.live-screen") as HTMLCanvasElement;
    const d = c.getContext("2d")?.getImageData(0, 0, c.width, c.height).data;
    if (!d) return 0;
    let near = 0;
    let all = 0;
    for (let i = 0; i < d.length; i += 4 * 53) {
      all++;
      if (Math.abs((d[i] ?? 0) - want[0]) + Math.abs((d[i + 1] ?? 0) - want[1]) + Math.abs((d[i + 2] ?? 0) - want[2]) < 60) near++;
    }
    return near / all;
  }, rgb);

/** Whether an element lies wholly inside the window as it is (no scrolling). */
const inView = (page: Page, selector: string) =>
  page.locator(selector).first().evaluate((el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;
  });

const leasesOn = async (id: string) => ((await farm(["lease", "list"], { ...lab.env, FARM_TOKEN: tokens["admin"] })).json["leases"] as { physicalId: string; holder: string }[]).filter((l) => l.physicalId === id);

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  lab = await startLab("dashboard-workspace");
  url = String(lab.standalone.ready["url"]);
  // A 720x1600 phone keeps encoding cheap.
  ({ device: phone, serial } = await lab.addDevice({ serialno: "WSPACE01", profile: 3 }));
  const listed = ((await farm(["devices"], lab.env)).json["devices"] as { serial: string; properties: { physicalId: string } }[]).find((d) => d.serial === serial);
  physicalId = listed?.properties.physicalId ?? "";
  tokens["admin"] = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
  for (const [name, role] of [["alice", "operator"], ["bob", "operator"], ["vic", "viewer"]] as const) {
    tokens[name] = String((await farm(["token", "create", "--kind", "user", "--name", name, "--role", role], lab.env)).json["token"]);
  }
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await lab?.stop();
});

describe("the device workspace", () => {
  it("at 1280×800 shows the screen, its buttons and the tabs without scrolling; leases, renews and releases from the page; the phone is free after", async () => {
    const alice = await signedIn("alice", devicePage());
    await expect.poll(() => alice.locator("[data-cell=\"lease\"]").textContent()).toBe("Not leased.");
    await alice.getByRole("button", { name: "Lease it for 30 minutes" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"screen-stats\"]").textContent(), { timeout: 20_000 }).toMatch(/H\.264/);
    await expect.poll(() => alice.locator("[data-cell=\"lease-remaining\"]").textContent()).toMatch(/^(29|30):\d\d$/);
    expect((await leasesOn(physicalId)).map((l) => l.holder)).toEqual(["alice"]);

    // Everything to work with is in the window as it opens.
    for (const sel of [
      "canvas.live-screen",
      "button[data-key=\"KEYCODE_BACK\"]",
      "button[data-key=\"KEYCODE_HOME\"]",
      "button[data-key=\"KEYCODE_APP_SWITCH\"]",
      "button[data-action=\"rotate\"]",
      "button[data-action=\"fullscreen\"]",
      "button[data-action=\"release\"]",
      "[role=tab][data-tab=\"apps\"]",
    ]) {
      expect(await inView(alice, sel), sel).toBe(true);
    }
    expect(await alice.evaluate(() => window.scrollY)).toBe(0);
    // As large as the window allows: most of its height.
    const box = await alice.locator("canvas.live-screen").boundingBox();
    expect(box && box.height).toBeGreaterThan(800 * 0.75);
    await alice.screenshot({ path: join(artifacts, "workspace-1280x800.png") });

    // Bob sees who holds it and when it frees; a viewer too, with no lease button.
    const bob = await signedIn("bob", devicePage());
    await expect.poll(() => bob.locator("[data-cell=\"lease\"]").textContent()).toMatch(/^Leased by alice · frees at \d\d:\d\d \(in \d+:\d\d\) unless renewed$/);
    expect(await bob.getByRole("button", { name: "Release" }).count()).toBe(0);

    await alice.getByRole("button", { name: "+15 min" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"lease-remaining\"]").textContent()).toMatch(/^4[45]:\d\d$/);
    await expect.poll(() => bob.locator("[data-cell=\"lease-remaining\"]").textContent(), { timeout: 10_000 }).toMatch(/^4[45]:\d\d$/);

    await alice.getByRole("button", { name: "Release" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"lease\"]").textContent()).toBe("Not leased.");
    await expect.poll(() => alice.locator("[data-cell=\"screen-status\"]").textContent()).toMatch(/^Lease this phone/);
    await alice.screenshot({ path: join(artifacts, "released.png") });
    // Free for the next user: no lease listed, and bob takes it at once from the CLI.
    expect(await leasesOn(physicalId)).toEqual([]);
    const taken = await farm(["lease", "acquire", "--device", serial, "--wait", "0s", "--ttl", "1m"], { ...lab.env, FARM_TOKEN: tokens["bob"] });
    expect(taken.code, taken.stdout + taken.stderr).toBe(0);
    await expect.poll(() => bob.locator("[data-cell=\"lease\"]").textContent(), { timeout: 10_000 }).toMatch(/^Leased by you elsewhere/);
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: tokens["bob"], FARM_LEASE: String((taken.json["lease"] as { token: string }).token) })).code).toBe(0);

    const vic = await signedIn("vic", devicePage());
    await expect.poll(() => vic.locator(".lease-bar").textContent()).toContain("Viewers watch only");
    expect(await vic.getByRole("button", { name: "Lease it for 30 minutes" }).count()).toBe(0);

    // An admin gets the same lease controls.
    const admin = await signedIn("admin", devicePage());
    await admin.getByRole("button", { name: "Lease it for 30 minutes" }).click();
    await expect.poll(() => admin.locator("[data-cell=\"lease-remaining\"]").textContent()).toMatch(/^(29|30):\d\d$/);
    await admin.getByRole("button", { name: "Release" }).click();
    await expect.poll(() => admin.locator("[data-cell=\"lease\"]").textContent()).toBe("Not leased.");
    expect(await leasesOn(physicalId)).toEqual([]);
    for (const p of [alice, bob, vic, admin]) await p.context().close();
  });

  it("installs a dropped APK through the upload endpoint and InstallApp, lists it, launches it onto the canvas, stops and uninstalls it", async () => {
    const alice = await signedIn("alice", devicePage());
    await alice.getByRole("button", { name: "Lease it for 30 minutes" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"screen-stats\"]").textContent(), { timeout: 20_000 }).toMatch(/H\.264/);
    await alice.getByRole("tab", { name: "Apps" }).click();
    // The phone's own third-party app is listed before anything is installed.
    await expect.poll(() => alice.locator("#device-apps tr[data-package=\"com.example.farmdemo\"]").count(), { timeout: 10_000 }).toBe(1);

    // Larger than any other plain dashboard body may be (64 KiB), so the upload's own limit is what lets it in.
    const apk = buildSimApk({ name: "com.example.hello", label: "Hello Farm", versionCode: 1, versionName: "1.0", mainActivity: ".MainActivity", padding: "x".repeat(300_000) } as Parameters<typeof buildSimApk>[0]);
    const dropped = await alice.evaluateHandle((b64) => {
      const dt = new DataTransfer();
      dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], "hello.apk", { type: "application/vnd.android.package-archive" }));
      return dt;
    }, apk.toString("base64"));
    await alice.dispatchEvent("[data-cell=\"apk-drop\"]", "drop", { dataTransfer: dropped });
    await expect.poll(() => alice.locator("[data-cell=\"apps-status\"]").textContent(), { timeout: 20_000 }).toBe("Installed hello.apk: Success.");
    expect(phone.state.packages.get("com.example.hello")?.label).toBe("Hello Farm");
    const row = alice.locator("#device-apps tr[data-package=\"com.example.hello\"]");
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1);
    await alice.screenshot({ path: join(artifacts, "apps-installed.png") });

    // Launch: the app's activity is on the phone, and on the canvas (its purple title bar).
    const purple: [number, number, number] = [0x6a, 0x1b, 0x9a];
    expect(await canvasShare(alice, purple)).toBeLessThan(0.01);
    await row.getByRole("button", { name: "Launch com.example.hello" }).click();
    await expect.poll(() => phone.state.screen.focusedPackage, { timeout: 10_000 }).toBe("com.example.hello");
    await expect.poll(() => canvasShare(alice, purple), { timeout: 15_000 }).toBeGreaterThan(0.02);
    await alice.screenshot({ path: join(artifacts, "apps-launched.png") });

    await row.getByRole("button", { name: "Stop com.example.hello" }).click();
    await expect.poll(() => phone.state.screen.focusedPackage, { timeout: 10_000 }).not.toBe("com.example.hello");
    alice.once("dialog", (d) => void d.accept());
    await row.getByRole("button", { name: "Uninstall com.example.hello" }).click();
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(0);
    expect(phone.state.packages.get("com.example.hello")).toBeUndefined();

    // Each was a routed, journaled action of alice's.
    const activity = JSON.stringify((await farm(["activity", "--device", serial], { ...lab.env, FARM_TOKEN: tokens["admin"] })).json);
    expect(activity).toContain("installApp");
    expect(activity).toContain("pm uninstall com.example.hello");
    // Listing is a read (ListPackages), not a journaled shell command.
    expect(activity).toContain("listPackages");
    expect(activity).not.toContain("pm list packages");
    const token = String(await alice.evaluate((key) => sessionStorage.getItem(key), `farm.lease.${physicalId}`));
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: tokens["alice"], FARM_LEASE: token })).code).toBe(0);
    await alice.context().close();
  });

  it("shows every phone in the grid: a live thumbnail of the one you hold, who holds the other; filters by model; a card opens the workspace", async () => {
    const second = await lab.addDevice({ serialno: "WSPACE02", profile: 2 });
    const bobLease = await farm(["lease", "acquire", "--device", second.serial, "--ttl", "5m"], { ...lab.env, FARM_TOKEN: tokens["bob"] });
    expect(bobLease.code, bobLease.stdout + bobLease.stderr).toBe(0);
    const alice = await signedIn("alice", devicePage());
    await alice.getByRole("button", { name: "Lease it for 30 minutes" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"lease-remaining\"]").count()).toBe(1);
    await alice.goto(`${url}/dashboard/#/devices`);
    await alice.getByRole("button", { name: "Grid" }).click();
    const cards = alice.locator("#device-grid li.device-card");
    await expect.poll(() => cards.count(), { timeout: 10_000 }).toBe(2);
    const mine = alice.locator(`#device-grid li[data-group="${physicalId}"]`);
    const bobs = cards.filter({ hasText: second.serial });
    // Hers is live (frames drawn); bob's shows who holds it and no picture of his screen.
    await expect.poll(async () => Number((await mine.locator("canvas.live-thumb").getAttribute("data-drawn")) ?? 0), { timeout: 20_000 }).toBeGreaterThan(0);
    expect(await mine.locator("[data-cell=\"holder\"]").textContent()).toBe("Held by alice");
    expect(await bobs.locator("[data-cell=\"holder\"]").textContent()).toBe("Held by bob");
    expect(await bobs.locator("canvas, img").count()).toBe(0);
    expect(await bobs.locator("div.thumb").textContent()).toBe("Held by bob");
    await alice.screenshot({ path: join(artifacts, "grid.png"), fullPage: true });

    // An admin may watch every phone: both live, each from its phone's one shared stream.
    const admin = await signedIn("admin", "#/devices");
    await admin.getByRole("button", { name: "Grid" }).click();
    await expect.poll(() => admin.locator("#device-grid canvas.live-thumb").count(), { timeout: 10_000 }).toBe(2);
    for (const c of await admin.locator("#device-grid canvas.live-thumb").all()) {
      await expect.poll(async () => Number((await c.getAttribute("data-drawn")) ?? 0), { timeout: 20_000 }).toBeGreaterThan(0);
    }
    const metric = async (name: string) => Number((await (await fetch(`${url}/metrics`)).text()).split("\n").find((l) => l.startsWith(`${name} `))?.split(" ")[1]);
    // Alice's phone: her thumbnail and the admin's share one feed (two phones streamed, three viewers).
    // Polled: a viewer of the page before (the workspace test's screen) leaves when its stream's end reaches the coordinator.
    await expect.poll(() => metric("farm_live_screens"), { timeout: 20_000 }).toBe(2);
    await expect.poll(() => metric("farm_live_screen_viewers"), { timeout: 20_000 }).toBe(3);
    await admin.screenshot({ path: join(artifacts, "grid-admin.png"), fullPage: true });

    // The filter narrows by model; a card opens the phone's workspace.
    await alice.locator("#device-search").fill("pixel");
    await expect.poll(() => cards.count()).toBe(1);
    await alice.locator("#device-search").fill("moto");
    await expect.poll(() => cards.count()).toBe(1);
    await mine.getByRole("link").first().click();
    await expect.poll(() => alice.locator(".ws-title h1").textContent()).toBe("motorola moto g(30)");

    const token = String(await alice.evaluate((key) => sessionStorage.getItem(key), `farm.lease.${physicalId}`));
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: tokens["alice"], FARM_LEASE: token })).code).toBe(0);
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: tokens["bob"], FARM_LEASE: String((bobLease.json["lease"] as { token: string }).token) })).code).toBe(0);
    for (const p of [alice, admin]) await p.context().close();
  });

  it("reads plainly: overview counts by state in words, failures with readable names, an element not found is no change, typed text masked for others", async () => {
    const env = { ...lab.env, FARM_TOKEN: tokens["alice"], FARM_DEVICE: serial };
    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], env);
    const token = String((lease.json["lease"] as { token: string }).token);
    const missing = await farm(["input", "tap", "--text", "No such button anywhere"], { ...env, FARM_LEASE: token });
    expect(missing.json).toMatchObject({ ok: false, code: "ELEMENT_NOT_FOUND" });
    expect((await farm(["input", "text", "secret words"], { ...env, FARM_LEASE: token })).code).toBe(0);
    expect((await farm(["lease", "release"], { ...env, FARM_LEASE: token })).code).toBe(0);

    const bob = await signedIn("bob", "#/overview");
    await expect.poll(() => bob.locator("[data-metric=\"devices-device\"] .label").textContent(), { timeout: 10_000 }).toMatch(/^devices? online$/);
    await expect.poll(() => bob.locator(".failures").textContent(), { timeout: 10_000 }).toContain(`Send input on ${serial} by alice: ELEMENT_NOT_FOUND`);
    await bob.screenshot({ path: join(artifacts, "overview.png"), fullPage: true });
    await bob.goto(`${url}/dashboard/#/activity`);
    const tapRow = bob.locator("tbody tr", { hasText: "ELEMENT_NOT_FOUND" }).first();
    await expect.poll(() => tapRow.locator(".tag").textContent(), { timeout: 10_000 }).toBe("no change");
    // What was typed is alice's: bob sees its kind and length, not the words.
    const typed = bob.locator("tbody tr", { hasText: "text [" }).first();
    await expect.poll(() => typed.textContent(), { timeout: 10_000 }).toMatch(/text \[12 chars/);
    expect(await bob.locator("tbody").textContent()).not.toContain("secret words");
    await bob.screenshot({ path: join(artifacts, "activity.png"), fullPage: true });
    await bob.context().close();
  });

  it("shows a session's timeline compactly, one line per step, a step's images opened on request", async () => {
    const env = { ...lab.env, FARM_TOKEN: tokens["alice"], FARM_DEVICE: serial };
    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], env);
    const token = String((lease.json["lease"] as { token: string }).token);
    const started = await farm(["session", "start", "--name", "compact"], { ...env, FARM_LEASE: token });
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const sessionId = String((started.json["session"] as { sessionId: string }).sessionId);
    for (const key of ["KEYCODE_HOME", "KEYCODE_BACK"]) expect((await farm(["input", "key", key], { ...env, FARM_LEASE: token, FARM_SESSION: sessionId })).code).toBe(0);
    expect((await farm(["session", "end", "--session", sessionId, "--status", "passed"], { ...env, FARM_LEASE: token })).code).toBe(0);
    expect((await farm(["lease", "release"], { ...env, FARM_LEASE: token })).code).toBe(0);

    const alice = await signedIn("alice", `#/test-sessions/${sessionId}`);
    const step1 = alice.locator("li.step[data-seq=\"1\"]");
    await expect.poll(() => alice.locator("li.step").count(), { timeout: 10_000 }).toBe(2);
    // A short session opens in full; the compact view is a click away.
    expect(await step1.locator(".step-body").isVisible()).toBe(true);
    await alice.getByRole("button", { name: "Compact view" }).click();
    expect(await step1.locator(".step-body").isVisible()).toBe(false);
    expect(await step1.locator(".step-head").isVisible()).toBe(true);
    await alice.screenshot({ path: join(artifacts, "timeline-compact.png"), fullPage: true });
    await alice.getByRole("button", { name: "Details of step 1" }).click();
    expect(await step1.locator(".step-body").isVisible()).toBe(true);
    expect(await alice.locator("li.step[data-seq=\"2\"] .step-body").isVisible()).toBe(false);
    await alice.context().close();
  });

  it("fits a phone-width window: the workspace stacks, nothing is wider than the screen", async () => {
    const alice = await signedIn("alice", devicePage(), { width: 375, height: 812 });
    await alice.getByRole("button", { name: "Lease it for 30 minutes" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"screen-stats\"]").textContent(), { timeout: 20_000 }).toMatch(/H\.264/);
    await expect.poll(() => alice.locator("#device-test-sessions").count()).toBe(1);
    expect(await alice.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    const canvas = await alice.locator("canvas.live-screen").boundingBox();
    const back = await alice.locator("button[data-key=\"KEYCODE_BACK\"]").boundingBox();
    // Stacked: the buttons under the screen, not beside it.
    expect(canvas && back && back.y).toBeGreaterThan((canvas?.y ?? 0) + (canvas?.height ?? 0) - 1);
    await alice.screenshot({ path: join(artifacts, "workspace-375.png"), fullPage: true });
    await alice.getByRole("button", { name: "Release" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"lease\"]").textContent()).toBe("Not leased.");
    await alice.context().close();
  });

  it("refuses an upload that is cross-site, from a viewer, without a good sha256, or larger than the limit, before reading it", async () => {
    const post = (headers: Record<string, string>, body = "x") => fetch(`${url}/dashboard/api/blobs`, { method: "POST", headers, body }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, string> }));
    const sha = "a".repeat(64);
    expect(await post({ authorization: `Bearer ${tokens["alice"]}`, origin: "https://evil.example", "x-farm-sha256": sha })).toMatchObject({ status: 403, body: { code: "PERMISSION_DENIED" } });
    expect(await post({ authorization: `Bearer ${tokens["vic"]}`, "x-farm-sha256": sha })).toMatchObject({ status: 403, body: { code: "PERMISSION_DENIED" } });
    expect(await post({ "x-farm-sha256": sha })).toMatchObject({ status: 401, body: { code: "UNAUTHENTICATED" } });
    expect(await post({ authorization: `Bearer ${tokens["alice"]}`, "x-farm-sha256": "nope" })).toMatchObject({ status: 400, body: { code: "INVALID_ARGUMENT", field: "sha256" } });
    // Bytes that do not match what was announced are not kept.
    expect(await post({ authorization: `Bearer ${tokens["alice"]}`, "x-farm-sha256": sha })).toMatchObject({ body: { code: "EVIDENCE_TRANSFER_FAILED" } });
    // 3 GB announced, nothing sent: refused from the headers alone.
    const tooLarge = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${url}/dashboard/api/blobs`, { method: "POST", headers: { authorization: `Bearer ${tokens["alice"]}`, "x-farm-sha256": sha, "content-length": String(3 * 1024 ** 3) } }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      req.flushHeaders();
    });
    expect(tooLarge.status).toBe(413);
    expect(JSON.parse(tooLarge.body)).toMatchObject({ code: "MESSAGE_TOO_LARGE", field: "content-length" });
  });
});
