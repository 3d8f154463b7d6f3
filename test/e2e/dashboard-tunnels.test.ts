/// <reference lib="dom" />
/**
 * Remote adb tunnels on the dashboard's device page, in a real browser
 * (Debian's Chromium driven by playwright-core) against `farm standalone`,
 * a simulated phone, and `farm adb connect --foreground` serving the
 * tunnel into the user's own adb server (on a private port). Screenshots go
 * to test-artifacts/dashboard-tunnels/.
 */
import type { ChildProcess } from "node:child_process";
import { mkdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdb, startAdbServer, type AdbServer } from "../devsim/index.js";
import { connectForeground as startForeground, type ForegroundTunnel } from "../support/adb-connect.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

const artifacts = fileURLToPath(new URL("../../test-artifacts/dashboard-tunnels/", import.meta.url));
/** Opening, closing and counts reach the page within this (counts are sent at most every 2 s). */
const LIVE_MS = 5_000;

let lab: Lab;
let user: AdbServer;
let serial = "";
let adminToken = "";
let aliceToken = "";
let browser: Browser;
const children: ChildProcess[] = [];

async function connectForeground(env: NodeJS.ProcessEnv): Promise<ForegroundTunnel> {
  const t = await startForeground(env);
  children.push(t.proc);
  return t;
}

/** A page signed in to the dashboard with a user token. */
async function signedIn(token: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  await page.goto(`${String(lab.standalone.ready["url"])}/dashboard/`);
  await page.getByLabel("User token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect.poll(() => page.locator("#nav").isVisible()).toBe(true);
  return page;
}

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  lab = await startLab("dashboard-tunnels");
  ({ serial } = await lab.addDevice({ serialno: "DTUNNEL01" }));
  adminToken = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
  aliceToken = String((await farm(["token", "create", "--kind", "user", "--name", "alice"], lab.env)).json["token"]);
  user = await startAdbServer();
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
}, 120_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await browser?.close();
  await user?.stop();
  await lab?.stop();
});

describe("remote adb on the device page", () => {
  it("lists a tunnel live with its user and bytes each way; an admin closes it from the page and the CLI says so", async () => {
    const aliceEnv = { ...lab.env, FARM_TOKEN: aliceToken };
    const acquired = await farm(["lease", "acquire", "--device", serial], aliceEnv);
    expect(acquired.code, acquired.stdout + acquired.stderr).toBe(0);
    const lease = acquired.json["lease"] as { token: string; physicalId: string };

    const admin = await signedIn(adminToken);
    const alice = await signedIn(aliceToken);
    const devicePage = `#/devices/${encodeURIComponent(lease.physicalId)}`;
    for (const p of [admin, alice]) await p.goto(`${String(lab.standalone.ready["url"])}/dashboard/${devicePage}`);
    await expect.poll(() => admin.locator("#device-tunnels tbody").textContent()).toContain("No remote adb tunnels");

    // Opened while the page is open: it appears without a reload.
    const tunnel = await connectForeground({ ...aliceEnv, FARM_LEASE: lease.token, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String(user.port) });
    expect(tunnel.answer, tunnel.lines.join("\n")).toMatchObject({ ok: true, device: serial });
    const id = String(tunnel.answer["tunnel"]);
    const local = String(tunnel.answer["serial"]);
    const row = (p: Page) => p.locator(`#device-tunnels tr[data-tunnel="${id}"]`);
    await expect.poll(() => row(admin).locator("[data-cell=\"owner\"]").textContent(), { timeout: LIVE_MS }).toBe("alice");
    await expect.poll(() => row(alice).locator("[data-cell=\"owner\"]").textContent(), { timeout: LIVE_MS }).toBe("alice");
    expect(await row(admin).locator("[data-cell=\"since\"]").textContent()).toMatch(/^\d+s ago$/);

    // Bytes through the tunnel show up on the page.
    await waitFor("the tunnel listed by the user's adb", async () => ((await runAdb(user.port, ["devices"])).stdout.includes(`${local}\tdevice`) ? true : undefined));
    const shell = await runAdb(user.port, ["-s", local, "shell", "echo through the tunnel"]);
    expect(shell.stdout.trim()).toBe("through the tunnel");
    await expect.poll(() => row(admin).locator("[data-cell=\"from-device\"]").textContent(), { timeout: LIVE_MS }).not.toBe("0 B");
    expect(await row(admin).locator("[data-cell=\"to-device\"]").textContent()).toMatch(/^\d+(\.\d)? (B|KiB|MiB)$/);
    await admin.screenshot({ path: join(artifacts, "device-tunnel.png"), fullPage: true });

    // Only an admin is offered Close; alice closes hers with farm adb disconnect.
    expect(await row(alice).getByRole("button").count()).toBe(0);
    admin.once("dialog", (d) => void d.accept());
    await row(admin).getByRole("button", { name: "Close alice's tunnel" }).click();
    expect(await tunnel.exited).toBe(69);
    expect(tunnel.lines.join("\n")).toMatch(/TUNNEL_CLOSED/);
    expect(tunnel.lines.join("\n")).toContain("closed by the admin");
    for (const p of [admin, alice]) await expect.poll(() => row(p).count(), { timeout: LIVE_MS }).toBe(0);
    expect(await admin.locator("#device-tunnels tbody").textContent()).toContain("No remote adb tunnels");
    expect(await admin.locator("#device-tunnels [role=status]").textContent()).toBe("Closed alice's tunnel.");
    await admin.screenshot({ path: join(artifacts, "device-tunnel-closed.png"), fullPage: true });

    expect((await farm(["lease", "release"], { ...aliceEnv, FARM_LEASE: lease.token })).code).toBe(0);
  });
});
