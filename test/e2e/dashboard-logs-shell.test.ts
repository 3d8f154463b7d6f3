/// <reference lib="dom" />
/**
 * The device workspace's Logs, Shell and Files tabs in a real browser (Debian's
 * Chromium) against `farm standalone` and a simulated phone, each on its
 * own page (#/device/<id>/logs, …/shell, …/files) until the workspace
 * holds them. Screenshots go to test-artifacts/dashboard-logs-shell/.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimDevice } from "../devsim/index.js";
import { ROOT } from "../devsim/fs/caller.js";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

const artifacts = fileURLToPath(new URL("../../test-artifacts/dashboard-logs-shell/", import.meta.url));

let lab: Lab;
let phone: SimDevice;
let serial = "";
let physicalId = "";
let aliceToken = "";
let bobToken = "";
let browser: Browser;
const url = () => String(lab.standalone.ready["url"]);

/** A signed-in page on one of the phone's tabs, holding `leaseToken` for it as the device page would. */
async function onTab(token: string, tab: string, leaseToken = ""): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  await page.goto(`${url()}/dashboard/`);
  await page.getByLabel("User token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect.poll(() => page.locator("#nav").isVisible(), { timeout: 20_000 }).toBe(true);
  if (leaseToken) await page.evaluate(([key, value]) => sessionStorage.setItem(key as string, value as string), [`farm.lease.${physicalId}`, leaseToken]);
  await page.goto(`${url()}/dashboard/#/device/${encodeURIComponent(physicalId)}/${tab}`);
  return page;
}

const metric = async (name: string) => (await (await fetch(`${url()}/metrics`)).text()).split("\n").find((l) => l.startsWith(`${name} `));

async function lease(token: string): Promise<string> {
  const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], { ...lab.env, FARM_TOKEN: token });
  expect(acquired.code).toBe(0);
  return String((acquired.json["lease"] as { token: string }).token);
}

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  lab = await startLab("dashboard-logs-shell");
  ({ device: phone, serial } = await lab.addDevice({ serialno: "DLOGS01" }));
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

describe("the Logs tab", () => {
  it("shows a line written by `farm shell -- log -t x hello` within a second, without farm's step markers; the filters hide the rest; others are refused", async () => {
    const leaseToken = await lease(aliceToken);
    const alice = await onTab(aliceToken, "logs", leaseToken);
    // The backlog arrives first: the phone's boot lines.
    await expect.poll(() => alice.locator("[data-cell=\"log-rows\"]").textContent(), { timeout: 20_000 }).toContain("System now ready");
    // When the line reaches the page, by the browser's clock (the same machine's as ours).
    await alice.evaluate(() => {
      const rows = document.querySelector("[data-cell=\"log-rows\"]") as HTMLElement;
      new MutationObserver(() => {
        if (!rows.dataset["helloAt"] && [...rows.querySelectorAll(".log-line")].some((r) => r.textContent?.endsWith(" x: hello"))) rows.dataset["helloAt"] = String(Date.now());
      }).observe(rows, { childList: true });
    });
    // When the line reached the phone's log.
    let loggedAt = 0;
    const unsubscribe = phone.state.log.subscribe((e) => {
      if (e.tag === "x" && e.message === "hello" && !loggedAt) loggedAt = Date.now();
    });
    const env = { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: leaseToken };
    try {
      // farm's own step marker, as a recorded step's device log writes it: never shown.
      expect((await farm(["shell", "--device", serial, "--", "log", "-t", "farmstep", "begin", "0123456789ab"], env)).code).toBe(0);
      expect((await farm(["shell", "--device", serial, "--", "log", "-t", "x", "hello"], env)).code).toBe(0);
      await expect.poll(() => alice.locator("[data-cell=\"log-rows\"]").getAttribute("data-hello-at"), { timeout: 20_000 }).toBeTruthy();
    } finally {
      unsubscribe();
    }
    const shownAt = Number(await alice.locator("[data-cell=\"log-rows\"]").getAttribute("data-hello-at"));
    const latencyMs = shownAt - loggedAt;
    writeFileSync(join(artifacts, "logcat-latency.json"), JSON.stringify({ latencyMs }, null, 2));
    expect(loggedAt).toBeGreaterThan(0);
    expect(latencyMs).toBeLessThan(1_000);
    expect(await alice.locator("[data-cell=\"log-rows\"]").textContent()).not.toContain("farmstep");
    await alice.screenshot({ path: join(artifacts, "logs.png"), fullPage: true });

    // The tag filter hides every other tag.
    const all = await alice.locator(".log-line").count();
    await alice.getByLabel("Tag filter").fill("x");
    await expect.poll(() => alice.locator(".log-line").count(), { timeout: 20_000 }).toBeLessThan(all);
    const tags = await alice.locator(".log-line").evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset["tag"] ?? ""));
    expect(tags.length).toBeGreaterThan(0);
    expect(tags.every((t) => t.toLowerCase().includes("x"))).toBe(true);
    expect(await alice.locator("[data-cell=\"log-rows\"]").textContent()).toContain("x: hello");
    await alice.screenshot({ path: join(artifacts, "logs-filtered.png"), fullPage: true });
    // And the level filter hides an Info line.
    await alice.getByLabel("Lowest level").selectOption("E");
    await expect.poll(() => alice.locator(".log-line").count(), { timeout: 20_000 }).toBe(0);
    await alice.getByLabel("Lowest level").selectOption("V");
    await expect.poll(() => alice.locator(".log-line").count(), { timeout: 20_000 }).toBeGreaterThan(0);

    // Bob holds no lease on it: the log is alice's.
    const bob = await onTab(bobToken, "logs");
    await expect.poll(() => bob.locator("[data-cell=\"log-status\"]").textContent(), { timeout: 20_000 }).toMatch(/only the holder|lease/i);
    expect(await bob.locator(".log-line").count()).toBe(0);
    await bob.screenshot({ path: join(artifacts, "logs-refused.png"), fullPage: true });

    // One stream for the phone, however many pages read it: a second page of alice's joins it.
    const second = await onTab(aliceToken, "logs", leaseToken);
    await expect.poll(() => second.locator("[data-cell=\"log-rows\"]").textContent(), { timeout: 20_000 }).toContain("x: hello");
    await expect.poll(() => metric("farm_live_logcat_viewers"), { timeout: 20_000 }).toBe("farm_live_logcat_viewers 2");
    expect(await metric("farm_live_logcats")).toBe("farm_live_logcats 1");

    // The lease's end ends the holder's streams.
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: leaseToken })).code).toBe(0);
    await expect.poll(() => metric("farm_live_logcat_viewers"), { timeout: 20_000 }).toBe("farm_live_logcat_viewers 0");
    await expect.poll(() => alice.locator("[data-cell=\"log-status\"]").textContent(), { timeout: 20_000 }).toMatch(/lease/i);
    for (const p of [alice, bob, second]) await p.context().close();
  });
});

describe("the Logs tab's package filter", () => {
  it("shows a line written by the app's own process under its package, and hides the lines of every other process", async () => {
    const leaseToken = await lease(aliceToken);
    const env = { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: leaseToken };
    const demo = "com.example.farmdemo";
    const alice = await onTab(aliceToken, "logs", leaseToken);
    await expect.poll(() => alice.locator("[data-cell=\"log-rows\"]").textContent(), { timeout: 20_000 }).toContain("System now ready");
    // A fresh process of the app (a new pid): its runtime writes a line of its own as it comes up.
    expect((await farm(["shell", "--device", serial, "--", "am", "force-stop", demo], env)).code).toBe(0);
    expect((await farm(["shell", "--device", serial, "--", "am", "start", "-n", `${demo}/.MainActivity`], env)).code).toBe(0);
    const appPid = phone.state.processes.find((p) => p.packageName === demo)?.pid ?? 0;
    expect(appPid).toBeGreaterThan(0);
    // And a line of another process (the log tool's), after it.
    expect((await farm(["shell", "--device", serial, "--", "log", "-t", "other", "not the app"], env)).code).toBe(0);
    await expect.poll(() => alice.locator("[data-cell=\"log-rows\"]").textContent(), { timeout: 20_000 }).toContain("other: not the app");

    await alice.getByLabel("Package filter").fill(demo);
    await expect.poll(() => alice.locator(".log-line").evaluateAll((rows) => rows.map((r) => (r as HTMLElement).textContent ?? "")), { timeout: 20_000 })
      .toEqual(expect.arrayContaining([expect.stringMatching(new RegExp(`^\\S+ \\S+ +${appPid} .* Late-enabling -Xcheck:jni$`))]));
    const shown = await alice.locator(".log-line").evaluateAll((rows) => rows.map((r) => ({ pkg: (r as HTMLElement).dataset["package"] ?? "", text: r.textContent ?? "" })));
    expect(shown.every((r) => r.pkg === demo)).toBe(true);
    const text = shown.map((r) => r.text).join("\n");
    expect(text).not.toContain("not the app");
    expect(text).not.toContain("System now ready");
    await alice.screenshot({ path: join(artifacts, "logs-package-filter.png"), fullPage: true });
    // Cleared, every line is back.
    await alice.getByLabel("Package filter").fill("");
    await expect.poll(() => alice.locator("[data-cell=\"log-rows\"]").textContent(), { timeout: 20_000 }).toContain("other: not the app");
    await alice.context().close();
    expect((await farm(["lease", "release"], env)).code).toBe(0);
  });
});

describe("the Shell tab", () => {
  it("runs `getprop ro.product.model` in the browser's terminal and shows the phone's model; closing the tab ends the journaled shell", async () => {
    const leaseToken = await lease(aliceToken);
    const alice = await onTab(aliceToken, "shell", leaseToken);
    await expect.poll(() => alice.locator("[data-cell=\"shell-status\"]").textContent(), { timeout: 20_000 }).toMatch(/^Shell on /);
    await alice.locator(".xterm").click();
    await alice.keyboard.type("getprop ro.product.model\r");
    const rows = alice.locator(".xterm-rows");
    // The model on a line of its own, after the command line that asked for it.
    await expect.poll(async () => ((await rows.textContent()) ?? "").split("getprop ro.product.model")[1] ?? "", { timeout: 20_000 }).toContain(phone.model);
    expect(phone.model).not.toBe("");
    await alice.screenshot({ path: join(artifacts, "shell.png"), fullPage: true });

    // Bob holds no lease: no shell for him.
    const bob = await onTab(bobToken, "shell");
    await expect.poll(() => bob.locator("[data-cell=\"shell-status\"]").textContent(), { timeout: 20_000 }).toMatch(/lease holder/);
    await bob.context().close();

    // Leaving the page ends the shell: its action is settled and in the activity log as the dashboard's.
    await alice.goto(`${url()}/dashboard/#/devices`);
    const adminToken = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    await expect
      .poll(async () => JSON.stringify((await farm(["activity", "--device", serial], { ...lab.env, FARM_TOKEN: adminToken })).json), { timeout: 20_000 })
      .toContain("interactive (dashboard)");
    await alice.context().close();
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: leaseToken })).code).toBe(0);
  });
});

describe("the Files tab", () => {
  it("pushes a file to /sdcard/Download and pulls the same bytes back; a path outside it is refused before the phone is touched", async () => {
    const leaseToken = await lease(aliceToken);
    const alice = await onTab(aliceToken, "files", leaseToken);
    // Bytes of every value, past one adb sync chunk (64 KiB).
    const bytes = randomBytes(200_000);
    await alice.getByLabel("File to push").setInputFiles({ name: "data.bin", mimeType: "application/octet-stream", buffer: bytes });
    await expect.poll(() => alice.getByLabel("Name on the phone").inputValue(), { timeout: 20_000 }).toBe("data.bin");
    await alice.getByRole("button", { name: "Push to /sdcard/Download/" }).click();
    await expect.poll(() => alice.locator("[data-cell=\"files-status\"]").textContent(), { timeout: 30_000 }).toMatch(/^Pushed 200000 bytes to \/sdcard\/Download\/data\.bin/);
    expect(phone.state.fs.readFile("/sdcard/Download/data.bin", ROOT).equals(bytes)).toBe(true);
    await alice.screenshot({ path: join(artifacts, "files-pushed.png"), fullPage: true });
    // Journaled on the agent, in the activity log with its path.
    const activity = JSON.stringify((await farm(["activity", "--device", serial], { ...lab.env, FARM_TOKEN: aliceToken })).json);
    expect(activity).toContain("pushFile");

    expect(await alice.getByLabel("Path on the phone").inputValue()).toBe("/sdcard/Download/data.bin");
    const [download] = await Promise.all([alice.waitForEvent("download"), alice.getByRole("button", { name: "Pull" }).click()]);
    const pulled = await readFile(await download.path());
    expect(download.suggestedFilename()).toBe("data.bin");
    expect(pulled.equals(bytes)).toBe(true);
    await expect.poll(() => alice.locator("[data-cell=\"files-status\"]").textContent(), { timeout: 20_000 }).toMatch(/^Pulled \/sdcard\/Download\/data\.bin: 200000 bytes/);

    // Out of bounds: refused by the coordinator with the field named, before the call is routed to any agent.
    const bad = ["/sdcard/Download/../../data/local/tmp/x", "/data/local/tmp/x", "/sdcard/Download/a;rm -rf x"];
    for (const path of bad) {
      await alice.getByLabel("Path on the phone").fill(path);
      await alice.getByRole("button", { name: "Pull" }).click();
      await expect.poll(() => alice.locator("[data-cell=\"files-status\"]").textContent(), { timeout: 20_000 }).toMatch(/^Pull failed: path /);
      await alice.getByLabel("Path on the phone").fill("/sdcard/Download/");
    }
    await alice.screenshot({ path: join(artifacts, "files-refused.png"), fullPage: true });
    // In the activity log as refusals that never reached an agent (no agent id: not routed).
    type Entry = { command: string; outcome: string; agentId: string; detail: string };
    const entries = ((await farm(["activity", "--device", serial], { ...lab.env, FARM_TOKEN: aliceToken })).json["entries"] as Entry[]).filter((e) => e.command === "pullFile" && bad.includes(e.detail));
    expect(entries.map((e) => [e.outcome, e.agentId])).toEqual(bad.map(() => ["INVALID_ARGUMENT", ""]));

    // Bob holds no lease: the tab stays shut for him.
    const bob = await onTab(bobToken, "files");
    await expect.poll(() => bob.locator("[data-cell=\"files-status\"]").textContent(), { timeout: 20_000 }).toMatch(/lease holder/);
    expect(await bob.getByRole("button", { name: "Pull" }).isDisabled()).toBe(true);
    for (const p of [alice, bob]) await p.context().close();
    expect((await farm(["lease", "release"], { ...lab.env, FARM_TOKEN: aliceToken, FARM_LEASE: leaseToken })).code).toBe(0);
  });
});

describe("the browser's file upload (POST /dashboard/api/blobs)", () => {
  /** Sends only the headers of an upload and answers with what the coordinator said, before any body byte was sent. */
  const refusedBeforeBody = (headers: Record<string, string>) =>
    new Promise<{ status: number; code: string }>((resolve, reject) => {
      const req = request(`${url()}/dashboard/api/blobs?name=big.bin`, { method: "POST", headers }, (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (c: string) => (body += c)).on("end", () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, code: String((JSON.parse(body) as { code?: string }).code) });
        });
      });
      req.on("error", reject);
      // Headers only: the body would follow, and must not be needed for the answer.
      req.flushHeaders();
    });

  it("refuses a file past the limit, another site's page and a caller without a session, from the headers alone", async () => {
    const signIn = await fetch(`${url()}/dashboard/api/sign-in`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token: aliceToken }) });
    expect(signIn.status).toBe(200);
    const cookie = String(signIn.headers.get("set-cookie")).split(";")[0] as string;
    const big = String(256 * 1024 * 1024 + 1);
    expect(await refusedBeforeBody({ cookie, "content-length": big })).toEqual({ status: 413, code: "MESSAGE_TOO_LARGE" });
    expect(await refusedBeforeBody({ cookie, "content-length": "10", origin: "https://elsewhere.example" })).toEqual({ status: 403, code: "PERMISSION_DENIED" });
    expect(await refusedBeforeBody({ "content-length": "10" })).toEqual({ status: 401, code: "UNAUTHENTICATED" });
    // The same session's small upload is taken: the refusals above were the headers', not the session's.
    const small = await fetch(`${url()}/dashboard/api/blobs?name=x.bin`, { method: "POST", headers: { cookie, "content-type": "application/octet-stream" }, body: "0123456789" });
    expect(small.status).toBe(200);
    expect(((await small.json()) as { blobId: string }).blobId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
