/**
 * Phones cleaned between users (farm standalone --cleanup FILE): real
 * processes, the real adb server, simulated phones, the CLI, and the
 * dashboard in Chromium (screenshots in test-artifacts/phone-cleanup/).
 */
import { mkdirSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildSimApk, parseSimApk, runAdb, type SimDevice } from "../devsim/index.js";
import { farm, farmProcess, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

const artifacts = fileURLToPath(new URL("../../test-artifacts/phone-cleanup/", import.meta.url));

let lab: Lab;
let files: TempDir;
let browser: Browser | undefined;
let a: { device: SimDevice; serial: string };
let b: { device: SimDevice; serial: string };

const POLICY = `
version: 1
timeoutSeconds: 60
removeNewFilesUnder: [/sdcard/Download]
clearData: [com.example.before]
settings:
  system:
    screen_off_timeout: 60000
`;

interface Listed {
  serial: string;
  state: string;
  attentionReason?: string;
}

async function listed(serial: string): Promise<Listed | undefined> {
  const r = await farm(["devices"], lab.env);
  return (r.json["devices"] as Listed[] | undefined)?.find((d) => d.serial === serial);
}

/** Waits until `farm devices` shows the phone in this state (its cleanup finished one way or the other). */
function stateBecomes(serial: string, state: string): Promise<Listed> {
  return waitFor(`${serial} ${state}`, async () => {
    const d = await listed(serial);
    return d?.state === state ? d : undefined;
  }, { timeoutMs: 60_000 });
}

async function acquire(args: string[], env = lab.env) {
  const r = await farm(["lease", "acquire", "--ttl", "5m", ...args], env);
  return { ...r, lease: r.json["lease"] as { token: string; serial: string; leaseId: string } | undefined };
}

async function shell(serial: string, command: string): Promise<string> {
  return (await runAdb(lab.adb.port, ["-s", serial, "shell", command])).stdout;
}

async function apk(name: string): Promise<string> {
  const path = join(files.path, `${name}.apk`);
  await writeFile(path, buildSimApk({ name }));
  return path;
}

beforeAll(async () => {
  files = await makeTempDir("cleanup-policy");
  const policy = join(files.path, "cleanup.yaml");
  await writeFile(policy, POLICY);
  lab = await startLab("phone-cleanup", { args: ["--cleanup", policy] });
  a = await lab.addDevice({ serialno: "CLEAN0001" });
  b = await lab.addDevice({ serialno: "CLEAN0002" });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await lab?.stop();
  await files?.remove();
});

describe("farm standalone --cleanup", () => {
  it("refuses a policy that does not validate before it starts, naming the field", async () => {
    const bad = join(files.path, "bad.yaml");
    await writeFile(bad, "version: 1\nclearData: [not a package]\n");
    // Stops before it serves anything: the process exits with the config code.
    const r = await farmProcess(["standalone", "--cleanup", bad, "--listen", "127.0.0.1:0", "--data-dir", join(files.path, "never"), "--no-adb-start"], lab.env);
    expect(r.code).toBe(78);
    expect(r.json).toMatchObject({ ok: false, code: "CLEANUP_POLICY_INVALID", field: "clearData[0]" });
  });

  it("uninstalls what the lease installed, removes what it pushed, puts settings back, and frees the phone", async () => {
    // What the phone held before the lease stays (a third-party app, a file).
    const before = buildSimApk({ name: "com.example.before" });
    a.device.state.packages.install(parseSimApk(before)!, undefined, before);
    await shell(a.serial, "echo old > /sdcard/Download/old.txt");
    const held = await acquire(["--device", a.serial]);
    expect(held.json).toMatchObject({ ok: true });
    const env = { ...lab.env, FARM_LEASE: held.lease!.token, FARM_DEVICE: a.serial };
    expect((await farm(["install", await apk("com.example.during")], env)).json).toMatchObject({ ok: true });
    expect((await farm(["shell", "--", "echo new > /sdcard/Download/new.txt && mkdir /sdcard/Download/dir && echo x > /sdcard/Download/dir/f && settings put system screen_off_timeout 1000"], env)).json).toMatchObject({ ok: true });
    expect(await shell(a.serial, "pm list packages -3")).toContain("com.example.during");

    expect((await farm(["lease", "release", "--lease", held.lease!.token], lab.env)).json).toMatchObject({ ok: true });
    await stateBecomes(a.serial, "device");

    const packages = await shell(a.serial, "pm list packages -3");
    expect(packages).not.toContain("com.example.during");
    expect(packages).toContain("com.example.before");
    expect(await shell(a.serial, "ls /sdcard/Download")).toMatch(/^old\.txt\s*$/);
    expect((await shell(a.serial, "settings get system screen_off_timeout")).trim()).toBe("60000");
    expect((await shell(a.serial, "settings get global airplane_mode_on")).trim()).toBe("0");

    // Journaled as the farm's own actions, visible in activity.
    const activity = (await farm(["activity", "--device", a.serial], lab.env)).json["entries"] as { caller: string; command: string; outcome: string; detail: string }[];
    const mine = activity.filter((e) => e.caller === "farm:cleanup");
    expect(mine).toEqual(expect.arrayContaining([
      expect.objectContaining({ command: "cleanup.uninstall", outcome: "ok", detail: "com.example.during" }),
      expect.objectContaining({ command: "cleanup.remove-file", outcome: "ok", detail: "/sdcard/Download/new.txt" }),
      expect.objectContaining({ command: "cleanup.remove-file", outcome: "ok", detail: "/sdcard/Download/dir" }),
      expect.objectContaining({ command: "cleanup.clear-data", outcome: "ok", detail: "com.example.before" }),
      expect.objectContaining({ command: "cleanup.home", outcome: "ok" }),
      expect.objectContaining({ command: "cleanup", outcome: "ok" }),
    ]));
    // The files under the removed directory went with it: not removed one by one.
    expect(mine.some((e) => e.detail === "/sdcard/Download/dir/f")).toBe(false);

    // Leasable again.
    const again = await acquire(["--device", a.serial, "--wait", "0"]);
    expect(again.json).toMatchObject({ ok: true });
    await farm(["lease", "release", "--lease", again.lease!.token], lab.env);
    await stateBecomes(a.serial, "device");
  });

  it("marks a phone whose cleanup fails needs-attention with the reason; leases skip it until an admin clears it, across a restart", async () => {
    a.device.faults.set({ uninstallRefused: ["com.example.stuck"] });
    const held = await acquire(["--device", a.serial]);
    const env = { ...lab.env, FARM_LEASE: held.lease!.token, FARM_DEVICE: a.serial };
    expect((await farm(["install", await apk("com.example.stuck")], env)).json).toMatchObject({ ok: true });
    expect((await farm(["lease", "release", "--lease", held.lease!.token], lab.env)).json).toMatchObject({ ok: true });

    const marked = await stateBecomes(a.serial, "needs-attention");
    expect(marked.attentionReason).toMatch(/uninstall com\.example\.stuck failed/);
    const activity = (await farm(["activity", "--device", a.serial], lab.env)).json["entries"] as { caller: string; command: string; outcome: string }[];
    expect(activity).toEqual(expect.arrayContaining([expect.objectContaining({ caller: "farm:cleanup", command: "cleanup.uninstall", outcome: "CLEANUP_FAILED" })]));

    // Asked for by serial: refused with why, not waited on.
    expect((await acquire(["--device", a.serial, "--wait", "10s"])).json).toMatchObject({ ok: false, code: "DEVICE_NEEDS_ATTENTION", message: expect.stringMatching(/com\.example\.stuck/) });
    // Any phone: the other one.
    const any = await acquire(["--wait", "0"]);
    expect(any.lease?.serial).toBe(b.serial);
    await farm(["lease", "release", "--lease", any.lease!.token], lab.env);
    await stateBecomes(b.serial, "device");

    // The mark survives a restart of the coordinator.
    await lab.standalone.stop();
    await lab.restart();
    // The agent is back once the other phone is usable again.
    await stateBecomes(b.serial, "device");
    // The mark is kept by physical id: it shows once the agent has read this phone's identity again
    // (b's being back says nothing of a's; until then a lease by serial is refused DEVICE_IDENTITY_PENDING).
    const back = await waitFor("phone a listed with its identity", async () => {
      const d = (await listed(a.serial)) as (Listed & { properties?: { physicalId?: string } }) | undefined;
      return d?.properties?.physicalId ? d : undefined;
    }, { timeoutMs: 30_000 });
    expect(back).toMatchObject({ state: "needs-attention", attentionReason: expect.stringMatching(/com\.example\.stuck/) });

    // Only an admin clears it.
    const bot = await farm(["token", "create", "--kind", "user", "--name", "cleanup-bot"], lab.env);
    const botEnv = { ...lab.env, FARM_TOKEN: String(bot.json["token"]) };
    expect((await farm(["device", "clear-attention", "--device", a.serial], botEnv)).json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    a.device.faults.set({ uninstallRefused: null });
    expect((await farm(["device", "clear-attention", "--device", a.serial], lab.env)).json).toMatchObject({ ok: true, reason: expect.stringMatching(/com\.example\.stuck/) });
    await stateBecomes(a.serial, "device");
    const again = await acquire(["--device", a.serial, "--wait", "0"], botEnv);
    expect(again.json).toMatchObject({ ok: true });
    await farm(["lease", "release", "--lease", again.lease!.token], botEnv);
    await stateBecomes(a.serial, "device");
  });

  it("puts the screen's rotation back as the lease found it (the dashboard's Rotate turns auto-rotate off)", async () => {
    await shell(b.serial, "settings put system accelerometer_rotation 1");
    const held = await acquire(["--device", b.serial]);
    expect(held.json).toMatchObject({ ok: true });
    const env = { ...lab.env, FARM_LEASE: held.lease!.token, FARM_DEVICE: b.serial };
    // What the workspace's Rotate button runs (dashboard/src/views/device-screen.ts).
    expect((await farm(["shell", "--", "settings put system accelerometer_rotation 0 && settings put system user_rotation 1"], env)).json).toMatchObject({ ok: true });
    expect(b.device.state.display.rotation).toBe(1);
    expect((await farm(["lease", "release", "--lease", held.lease!.token], lab.env)).json).toMatchObject({ ok: true });
    await stateBecomes(b.serial, "device");

    expect((await shell(b.serial, "settings get system accelerometer_rotation")).trim()).toBe("1");
    expect((await shell(b.serial, "settings get system user_rotation")).trim()).toBe("0");
    expect(b.device.state.display.rotation).toBe(0);
    const activity = (await farm(["activity", "--device", b.serial], lab.env)).json["entries"] as { caller: string; command: string; outcome: string; detail: string }[];
    expect(activity).toEqual(expect.arrayContaining([
      expect.objectContaining({ caller: "farm:cleanup", command: "cleanup.restore-setting", outcome: "ok", detail: "system user_rotation" }),
      expect.objectContaining({ caller: "farm:cleanup", command: "cleanup.restore-setting", outcome: "ok", detail: "system accelerometer_rotation" }),
    ]));
  });

  it("in the dashboard: an app installed from the workspace is gone after its Release; a failed cleanup shows needs-attention with the reason, and the page offers no lease", async () => {
    mkdirSync(artifacts, { recursive: true });
    browser ??= await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
    const admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    const carol = String((await farm(["token", "create", "--kind", "user", "--name", "carol", "--role", "operator"], lab.env)).json["token"]);
    const physicalId = String(((await farm(["devices"], lab.env)).json["devices"] as { serial: string; properties: { physicalId: string } }[]).find((d) => d.serial === b.serial)?.properties.physicalId);
    const url = String(lab.standalone.ready["url"]);
    const signedIn = async (token: string, hash: string): Promise<Page> => {
      const page = await (await browser!.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
      page.setDefaultTimeout(15_000);
      await page.goto(`${url}/dashboard/`);
      await page.getByLabel("User token").fill(token);
      await page.getByRole("button", { name: "Sign in" }).click();
      await expect.poll(() => page.locator("#nav").isVisible(), { timeout: 20_000 }).toBe(true);
      await page.goto(`${url}/dashboard/${hash}`);
      return page;
    };
    const page = await signedIn(carol, `#/devices/${encodeURIComponent(physicalId)}`);
    /** Lease from the page, drop an APK on the Apps tab, release from the page. */
    const installDuringLease = async (name: string) => {
      await page.getByRole("button", { name: "Lease it for 30 minutes" }).click();
      await expect.poll(() => page.locator("[data-cell=\"lease-remaining\"]").textContent(), { timeout: 20_000 }).toMatch(/^(29|30):\d\d$/);
      await page.getByRole("tab", { name: "Apps" }).click();
      const dropped = await page.evaluateHandle(([b64, file]) => {
        const dt = new DataTransfer();
        dt.items.add(new File([Uint8Array.from(atob(b64 as string), (c) => c.charCodeAt(0))], file as string, { type: "application/vnd.android.package-archive" }));
        return dt;
      }, [buildSimApk({ name }).toString("base64"), `${name}.apk`]);
      await page.dispatchEvent("[data-cell=\"apk-drop\"]", "drop", { dataTransfer: dropped });
      await expect.poll(() => page.locator("[data-cell=\"apps-status\"]").textContent(), { timeout: 30_000 }).toBe(`Installed ${name}.apk: Success.`);
      await expect.poll(() => page.locator(`#device-apps tr[data-package="${name}"]`).count(), { timeout: 10_000 }).toBe(1);
      await page.getByRole("button", { name: "Release" }).click();
      await expect.poll(async () => (await farm(["lease", "list"], lab.env)).json["leases"], { timeout: 20_000 }).toEqual([]);
    };

    await installDuringLease("com.example.fromdash");
    await stateBecomes(b.serial, "device");
    expect(await shell(b.serial, "pm list packages -3")).not.toContain("com.example.fromdash");
    await page.screenshot({ path: join(artifacts, "cleaned.png"), fullPage: true });

    b.device.faults.set({ uninstallRefused: ["com.example.stuckdash"] });
    try {
      await installDuringLease("com.example.stuckdash");
      await stateBecomes(b.serial, "needs-attention");
      // An admin's devices page shows it, with the reason.
      const adminPage = await signedIn(admin, "#/devices");
      const state = adminPage.locator(`tr[data-group="${physicalId}"] [data-cell="state"]`);
      await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe("needs-attention");
      expect(await state.getAttribute("title")).toMatch(/uninstall com\.example\.stuckdash failed/);
      await adminPage.screenshot({ path: join(artifacts, "needs-attention.png"), fullPage: true });
      await adminPage.context().close();
      // The workspace says why instead of offering a lease the farm would refuse.
      await expect.poll(() => page.locator("[data-cell=\"lease\"]").textContent(), { timeout: 20_000 }).toMatch(/^Needs attention: .*uninstall com\.example\.stuckdash failed.*clear-attention/);
      expect(await page.getByRole("button", { name: "Lease it for 30 minutes" }).count()).toBe(0);
      // And leases skip it: asked for by serial, refused with why.
      expect((await acquire(["--device", b.serial, "--wait", "0"], { ...lab.env, FARM_TOKEN: carol })).json).toMatchObject({ ok: false, code: "DEVICE_NEEDS_ATTENTION" });
      expect((await farm(["lease", "list"], lab.env)).json["leases"]).toEqual([]);
      await page.screenshot({ path: join(artifacts, "lease-refused.png"), fullPage: true });
    } finally {
      b.device.faults.set({ uninstallRefused: null });
      await page.context().close();
      await farm(["device", "clear-attention", "--device", b.serial], lab.env);
    }
    await stateBecomes(b.serial, "device");
  }, 240_000);
});
