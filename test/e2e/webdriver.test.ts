/**
 * The WebDriver endpoint end to end: `farm standalone` as its own process,
 * a real adb server, simulated phones (test/devsim: launcher, Settings, the
 * demo app), the real WebdriverIO client, and the real CLI to look at what
 * farm recorded.
 */
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { remote } from "webdriverio";
import sharp from "sharp";
import { DOMParser } from "@xmldom/xmldom";
import { buildSimApk } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let token: string;
let url: URL;
let serial: string;
let other: string;

type Driver = Awaited<ReturnType<typeof remote>>;

/** A WebdriverIO session against the lab's coordinator, as a CI job would open one. */
function session(capabilities: Record<string, unknown>, opts: { token?: string | null } = {}): Promise<Driver> {
  const bearer = opts.token === null ? undefined : (opts.token ?? token);
  return remote({
    hostname: url.hostname,
    port: Number(url.port),
    protocol: "http",
    path: "/wd/hub",
    logLevel: "silent",
    connectionRetryCount: 0,
    ...(bearer ? { headers: { Authorization: `Bearer ${bearer}` } } : {}),
    capabilities: { platformName: "Android", ...capabilities } as WebdriverIO.Capabilities,
  });
}

/** A raw WebDriver call, for what a client library would not send. */
async function raw(method: string, path: string, body?: string, headers: Record<string, string> = { authorization: `Bearer ${token}` }): Promise<{ status: number; json: { value: Record<string, unknown> } }> {
  const res = await fetch(new URL(path, url), { method, headers: { "content-type": "application/json", ...headers }, ...(body !== undefined ? { body } : {}) });
  return { status: res.status, json: (await res.json()) as { value: Record<string, unknown> } };
}

/** Who holds a phone, as `farm lease list` shows it (null when free). */
async function holder(s: string): Promise<string | null> {
  const r = await farm(["lease", "list"], lab.env);
  expect(r.code, r.stderr).toBe(0);
  const lease = (r.json["leases"] as { serial: string; holder: string }[]).find((l) => l.serial === s);
  return lease?.holder ?? null;
}

async function activity(driver: Driver): Promise<string> {
  return String(await driver.execute("mobile: shell", { command: "dumpsys", args: ["activity", "activities"] }));
}

beforeAll(async () => {
  lab = await startLab("webdriver");
  url = new URL(String(lab.standalone.ready["url"]));
  token = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
  serial = (await lab.addDevice({ serialno: "WDRV0001" })).serial;
  other = (await lab.addDevice({ serialno: "WDRV0002" })).serial;
  expect((await farm(["device", "label", "set", serial, "pool=wd"], lab.env)).code).toBe(0);
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("webdriver endpoint", () => {
  it("runs a WebdriverIO test on a phone chosen by label; every command a step of the recorded session", async () => {
    const driver = await session({ "farm:labels": { pool: "wd" }, "farm:session": "wdio settings", "appium:newCommandTimeout": 120 });
    let ended = false;
    try {
      const caps = driver.capabilities as Record<string, unknown>;
      expect(caps["farm:serial"]).toBe(serial);
      expect(caps["farm:leaseId"]).toMatch(/.+/);
      expect(caps["appium:platformVersion"]).toMatch(/^\d+/);
      expect(JSON.stringify(caps)).not.toContain(token);
      expect(await holder(serial)).not.toBeNull();
      const recorded = String(caps["farm:sessionId"]);

      // Home: the launcher's Settings icon by accessibility id, xpath and UiSelector text: one element.
      await driver.execute("mobile: shell", { command: "input", args: ["keyevent", "KEYCODE_HOME"] });
      const byDesc = await driver.$("~Settings");
      const byXpath = await driver.$("//*[@content-desc=\"Settings\"]");
      const byText = await driver.$("android=new UiSelector().text(\"Settings\")");
      expect(await byDesc.getText()).toBe("Settings");
      expect(await byXpath.getElementRect(await byXpath.elementId)).toEqual(await byDesc.getElementRect(await byDesc.elementId));
      expect(await byText.getAttribute("content-desc")).toBe("Settings");
      expect(await byDesc.isEnabled()).toBe(true);

      // Click opens Settings; the icon's element is stale on the new screen.
      await byDesc.click();
      expect(await activity(driver)).toMatch(/mResumedActivity.*com\.android\.settings/);
      const display = await driver.$("id=com.android.settings:id/display");
      expect(await display.isExisting()).toBe(true);
      const stale = await raw("POST", `/wd/hub/session/${driver.sessionId}/element/${await byDesc.elementId}/click`, "{}");
      expect(stale.status).toBe(404);
      expect(stale.json.value["error"]).toBe("stale element reference");
      await driver.back();
      expect(await driver.$("~Settings").isExisting()).toBe(true);

      // Type into the demo app's field, then go on to its welcome screen.
      await driver.execute("mobile: shell", { command: "am", args: ["start", "-n", "com.example.farmdemo/.MainActivity"] });
      const name = await driver.$("id=com.example.farmdemo:id/name");
      await name.addValue("Ada");
      expect(await driver.$("id=com.example.farmdemo:id/name").getText()).toBe("Ada");
      await driver.$("id=com.example.farmdemo:id/next").click();
      expect(await driver.$("id=com.example.farmdemo:id/greeting").getText()).toBe("Welcome, Ada!");

      // The screenshot decodes at the phone's size; the page source is XML holding what was found.
      const window = await driver.getWindowRect();
      const png = Buffer.from(await driver.takeScreenshot(), "base64");
      const meta = await sharp(png).metadata();
      expect([meta.format, meta.width, meta.height]).toEqual(["png", window.width, window.height]);
      expect(window.width).toBeGreaterThan(0);
      const source = await driver.getPageSource();
      const doc = new DOMParser({
        onError: (level, msg) => {
          throw new Error(`${level}: ${msg}`);
        },
      }).parseFromString(source, "text/xml");
      expect(doc.documentElement?.nodeName).toBe("hierarchy");
      expect(source).toContain("Welcome, Ada!");

      // Unsupported commands are said so by name.
      const url2 = await raw("GET", `/wd/hub/session/${driver.sessionId}/url`);
      expect(url2.json.value).toMatchObject({ error: "unsupported operation" });
      expect(String(url2.json.value["message"])).toContain("getCurrentUrl");

      await driver.deleteSession();
      ended = true;
      expect(await holder(serial)).toBeNull();

      // The recorded session: one step per command that touched the phone, each with before and after.
      const shown = await farm(["session", "show", recorded], lab.env);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.json["session"]).toMatchObject({ status: "passed" });
      const steps = shown.json["steps"] as { action: string; result: { ok?: boolean }; before?: { sha256?: string }; after?: { sha256?: string } }[];
      // One step per command that touched the phone, in order: finds and page source read the tree;
      // element reads came from the cached tree and the focusing tap of addValue is journaled, not a step.
      expect(steps.map((s) => s.action)).toEqual([
        "shell", // HOME
        "ui-tree", // ~Settings
        "ui-tree", // xpath
        "ui-tree", // uiautomator text
        "tap", // click
        "shell", // dumpsys
        "ui-tree", // id=…display
        "ui-tree", // isExisting (WebdriverIO finds again)
        "key", // back
        "ui-tree", // ~Settings
        "ui-tree", // isExisting
        "shell", // am start
        "ui-tree", // name
        "text", // addValue
        "ui-tree", // name again
        "ui-tree", // next
        "tap", // click
        "ui-tree", // greeting
        "ui-tree", // page source
      ]);
      for (const s of steps) expect(s.result.ok, s.action).toBe(true);
      for (const s of steps) {
        expect(s.before?.sha256, `${s.action} before`).toMatch(/^[0-9a-f]{64}$/);
        expect(s.after?.sha256, `${s.action} after`).toMatch(/^[0-9a-f]{64}$/);
      }
    } finally {
      if (!ended) await driver.deleteSession().catch(() => undefined);
    }
  }, 180_000);

  it("a second client for one phone waits in the queue and gets it when the first deletes its session; no match fails at once", async () => {
    const first = await session({ "farm:labels": { pool: "wd" } });
    const second = session({ "farm:labels": { pool: "wd" }, "farm:waitSeconds": 60 });
    try {
      await waitFor("the second client queued", async () => {
        const r = await farm(["lease", "list"], lab.env);
        return ((r.json["queue"] as unknown[] | undefined) ?? []).length === 1 ? true : undefined;
      });
      await first.deleteSession();
      const got = await second;
      expect((got.capabilities as Record<string, unknown>)["farm:serial"]).toBe(serial);
      await got.deleteSession();
    } finally {
      await first.deleteSession().catch(() => undefined);
      await second.then((d) => d.deleteSession()).catch(() => undefined);
    }
    const started = Date.now();
    const none = await raw("POST", "/wd/hub/session", JSON.stringify({ capabilities: { alwaysMatch: { platformName: "Android", "farm:labels": { pool: "nowhere" }, "farm:waitSeconds": 600 } } }));
    expect(none.status).toBe(500);
    expect(none.json.value["error"]).toBe("session not created");
    expect(String(none.json.value["message"])).toMatch(/^NO_DEVICE_MATCHES: .*pool/);
    // At once: not after the 10 minutes it offered to wait.
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 120_000);

  it("refuses bad JSON, unknown farm capabilities and a missing token before any phone is touched", async () => {
    const bad = await raw("POST", "/session", "{not json");
    expect(bad.status).toBe(400);
    expect(bad.json.value["error"]).toBe("invalid argument");
    const unknown = await raw("POST", "/session", JSON.stringify({ capabilities: { alwaysMatch: { "farm:lables": { pool: "wd" } } } }));
    expect(unknown.status).toBe(400);
    expect(String(unknown.json.value["message"])).toContain("farm:lables");
    const huge = await raw("POST", "/wd/hub/session", JSON.stringify({ capabilities: { alwaysMatch: { "farm:session": "x".repeat(2 * 1024 * 1024) } } }));
    expect(huge.status).toBe(400);
    expect(huge.json.value).toMatchObject({ error: "invalid argument" });
    expect(String(huge.json.value["message"])).toMatch(/^MESSAGE_TOO_LARGE: /);
    const anonymous = await raw("POST", "/session", JSON.stringify({ capabilities: { alwaysMatch: {} } }), {});
    expect(anonymous.json.value["error"]).toBe("session not created");
    expect(String(anonymous.json.value["message"])).toMatch(/^UNAUTHENTICATED/);
    expect(await holder(serial)).toBeNull();
    expect(await holder(other)).toBeNull();
    const status = await raw("GET", "/status", undefined, {});
    expect(status.json.value).toMatchObject({ ready: true });
  }, 60_000);

  it("farm:token for a client without headers; an idle session is released and a late command says so", async () => {
    const driver = await session({ "appium:udid": other, "farm:token": token, "appium:newCommandTimeout": 2 }, { token: null });
    expect(await holder(other)).not.toBeNull();
    // Another token may not use it.
    const alice = String((await farm(["token", "create", "--kind", "user", "--name", "wd-alice", "--role", "operator"], lab.env)).json["token"]);
    const foreign = await raw("GET", `/session/${driver.sessionId}/source`, undefined, { authorization: `Bearer ${alice}` });
    expect(foreign.json.value["error"]).toBe("invalid session id");
    await waitFor("the idle session's phone released", async () => ((await holder(other)) === null ? true : undefined), { timeoutMs: 30_000 });
    const late = await raw("GET", `/session/${driver.sessionId}/source`, undefined, {});
    expect(late.status).toBe(404);
    expect(late.json.value["error"]).toBe("invalid session id");
    expect(String(late.json.value["message"])).toContain("released after 2 s idle");
  }, 60_000);

  it("masks farm:secrets in the recorded session; clears a field; installs APK bytes; crops an element; waits implicitly", async () => {
    const secret = "s3cret-Ada-9137";
    const driver = await session({ "appium:udid": other, "farm:session": "wdio secrets", "farm:secrets": { DEMO_NAME: secret }, "appium:appPackage": "com.example.farmdemo", "appium:appActivity": ".MainActivity" });
    let ended = false;
    try {
      const recorded = String((driver.capabilities as Record<string, unknown>)["farm:sessionId"]);
      const name = await driver.$("id=com.example.farmdemo:id/name");
      await name.addValue(secret);
      // A recorded step's answer is masked as what it stores: the tree read back holds no secret either.
      expect(await driver.$("id=com.example.farmdemo:id/name").getText()).toBe("[redacted]");
      expect(await driver.execute("mobile: shell", { command: "echo", args: ["typed"] })).toBe("typed\n");
      await driver.$("id=com.example.farmdemo:id/name").clearValue();
      // Empty, the field shows its hint, as UIAutomator reports it on a phone.
      expect(await driver.$("id=com.example.farmdemo:id/name").getText()).toBe("Your name");

      // The element's screenshot is the element's size, cut from the phone's screen.
      const field = await driver.$("id=com.example.farmdemo:id/name");
      const rect = await driver.getElementRect(await field.elementId);
      const crop = await sharp(Buffer.from(await driver.takeElementScreenshot(await field.elementId), "base64")).metadata();
      expect([crop.width, crop.height]).toEqual([rect.width, rect.height]);

      // An APK's bytes from the client, installed; then asked after and stopped.
      expect(await driver.isAppInstalled("com.example.wdextra")).toBe(false);
      await driver.execute("mobile: installApp", { apk: buildSimApk({ name: "com.example.wdextra" }).toString("base64") });
      expect(await driver.isAppInstalled("com.example.wdextra")).toBe(true);
      expect(await driver.terminateApp("com.example.farmdemo")).toBe(true);
      expect(await activity(driver)).not.toContain("com.example.farmdemo");
      await driver.activateApp("com.example.farmdemo");
      expect(await activity(driver)).toMatch(/mResumedActivity.*com\.example\.farmdemo/);
      const nope = await raw("POST", `/session/${driver.sessionId}/appium/device/activate_app`, JSON.stringify({ appId: "com.example.notthere" }));
      expect(String(nope.json.value["message"])).toContain("No activities found");
      const path = await raw("POST", `/session/${driver.sessionId}/appium/device/install_app`, JSON.stringify({ appPath: "/etc/passwd" }));
      expect(path.json.value["error"]).toBe("unsupported operation");

      // An implicit wait reads the tree again until it gives up; then no such element.
      await driver.setTimeout({ implicit: 1200 });
      const started = Date.now();
      const missing = await raw("POST", `/session/${driver.sessionId}/element`, JSON.stringify({ using: "id", value: "com.example.farmdemo:id/nothing" }));
      expect(missing.status).toBe(404);
      expect(missing.json.value["error"]).toBe("no such element");
      expect(String(missing.json.value["message"])).toMatch(/^ELEMENT_NOT_FOUND: .*within 1200 ms/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1200);

      await driver.deleteSession();
      ended = true;
      const shown = await farm(["session", "show", recorded], lab.env);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).not.toContain(secret);
      const steps = shown.json["steps"] as { action: string; arguments?: Record<string, unknown> }[];
      const typed = steps.find((s) => s.action === "text");
      // The typed step is there, with its text masked.
      expect(typed?.arguments).toBeDefined();
      expect(JSON.stringify(typed?.arguments)).not.toContain(secret);
    } finally {
      if (!ended) await driver.deleteSession().catch(() => undefined);
    }
  }, 120_000);

  it("W3C actions: a touch tap on an element's centre opens Settings; a swipe and a long press are routed inputs", async () => {
    const driver = await session({ "appium:udid": other });
    try {
      await driver.execute("mobile: shell", { command: "input", args: ["keyevent", "KEYCODE_HOME"] });
      const icon = await driver.$("~Settings");
      await driver.action("pointer", { parameters: { pointerType: "touch" } }).move({ origin: icon }).down().up().perform();
      expect(await activity(driver)).toMatch(/mResumedActivity.*com\.android\.settings/);
      // A swipe up the list and a long press: each one routed input (the journal has them).
      const rect = await driver.getWindowRect();
      const x = Math.round(rect.width / 2);
      await driver.action("pointer", { parameters: { pointerType: "touch" } }).move({ x, y: Math.round(rect.height * 0.7) }).down().move({ x, y: Math.round(rect.height * 0.3), duration: 200 }).up().perform();
      await driver.action("pointer", { parameters: { pointerType: "touch" } }).move({ x, y: Math.round(rect.height * 0.5) }).down().pause(700).up().perform();
      const journal = await farm(["device", "ownership", "status", "--device", other], lab.env);
      const recent = ((journal.json["ownership"] as { recent: { kind: string; requestJson: string }[] }).recent ?? []).filter((a) => a.kind === "input").slice(0, 3);
      // Newest first: the long press (a swipe held in place), the swipe, the tap.
      expect(recent.map((a) => (/swipe/.test(a.requestJson) ? "swipe" : /tap/.test(a.requestJson) ? "tap" : a.requestJson))).toEqual(["swipe", "swipe", "tap"]);
    } finally {
      await driver.deleteSession().catch(() => undefined);
    }
  }, 90_000);

  // Last: it restarts the coordinator.
  it("a coordinator shutdown ends its WebDriver sessions: the phone is free after a restart", async () => {
    const driver = await session({ "appium:udid": other, "farm:session": "wdio shutdown", "appium:newCommandTimeout": 3600 });
    const recorded = String((driver.capabilities as Record<string, unknown>)["farm:sessionId"]);
    expect(await holder(other)).not.toBeNull();
    // A lease outlives a restart (it is stored); only the shutdown's release frees it.
    expect(await lab.standalone.stop()).toBe(0);
    await lab.restart();
    expect(await holder(other)).toBeNull();
    const shown = await farm(["session", "show", recorded], lab.env);
    expect(shown.json["session"]).toMatchObject({ status: "passed" });
    const late = await raw("GET", `/session/${driver.sessionId}/source`);
    expect(late.json.value["error"]).toBe("invalid session id");
  }, 90_000);
});
