/// <reference lib="dom" />
/**
 * The device workspace through a replica that does not hold the phone's
 * agent: three `farm coordinator` processes on one PostgreSQL database, the
 * agent attached to replica 0 (A), the user on replica 1 (B). B carries the
 * phone's logcat once however many read it there (ReplicaService.RelayLogcat,
 * as RelayScreen carries the screen), the grid's thumbnails come off B's
 * relayed screen feed, and the Shell tab's pty shell is relayed
 * (RelayShell). Screenshots go to test-artifacts/replica-workspace/.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { toErrorReport } from "@farm/shared/errors";
import { LiveScreenService } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { LogcatService, type LogLine } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm, waitFor } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";

const artifacts = fileURLToPath(new URL("../../test-artifacts/replica-workspace/", import.meta.url));

let lab: ReplicaLab;
let serial = "";
let physicalId = "";
let alice = "";
let bob = "";
let browser: Browser;
const A = 0;
const B = 1;

function clientOf<S extends typeof LiveScreenService | typeof LogcatService>(service: S, replica: number, token: string, lease?: string) {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    if (lease) req.header.set("x-farm-lease", lease);
    return next(req);
  };
  return createClient(service, createGrpcTransport({ baseUrl: lab.urlOf(replica), interceptors: [auth] }));
}

/** A gauge from a replica's /metrics. */
async function metric(replica: number, name: string): Promise<number | undefined> {
  const line = (await (await fetch(`${lab.urlOf(replica)}/metrics`)).text()).split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(" ")[1]);
}

async function aliceLease(): Promise<string> {
  const r = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], { ...lab.envs[B], FARM_TOKEN: alice });
  expect(r.json).toMatchObject({ ok: true });
  return String((r.json["lease"] as { token: string }).token);
}

async function release(lease: string): Promise<void> {
  expect((await farm(["lease", "release", "--lease", lease], { ...lab.envs[B], FARM_TOKEN: alice })).json).toMatchObject({ ok: true });
}

/** A page of B's dashboard signed in as alice, on one of the phone's tabs, holding her lease as the device page would. */
async function onTabThroughB(tab: string, leaseToken: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  await page.goto(`${lab.urlOf(B)}/dashboard/`);
  await page.getByLabel("User token").fill(alice);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect.poll(() => page.locator("#nav").isVisible(), { timeout: 20_000 }).toBe(true);
  await page.evaluate(([key, value]) => sessionStorage.setItem(key as string, value as string), [`farm.lease.${physicalId}`, leaseToken]);
  await page.goto(`${lab.urlOf(B)}/dashboard/#/device/${encodeURIComponent(physicalId)}/${tab}`);
  return page;
}

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  lab = await startReplicaLab("replica-workspace", { agentName: "lab", serialno: "RWORK01", replicas: 3 });
  serial = lab.serial;
  alice = String((await farm(["token", "create", "--kind", "user", "--name", "alice", "--role", "operator"], lab.envs[A])).json["token"]);
  bob = String((await farm(["token", "create", "--kind", "user", "--name", "bob", "--role", "operator"], lab.envs[A])).json["token"]);
  const listed = ((await farm(["devices"], lab.envs[B])).json["devices"] as { serial: string; properties: { physicalId: string } }[]).find((d) => d.serial === serial);
  physicalId = listed?.properties.physicalId ?? "";
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await lab?.stop();
});

describe("the workspace through a replica not holding the agent", () => {
  it("reads the phone's logcat through B, one relay per phone however many read it there; others are refused; the lease's end ends it on A", async () => {
    const lease = await aliceLease();
    const readers = [new AbortController(), new AbortController()];
    const seen: LogLine[][] = [[], []];
    const reads = readers.map((stop, i) =>
      (async () => {
        for await (const res of clientOf(LogcatService, B, alice, lease).watchLogcat({ target: { serial } }, { signal: stop.signal })) seen[i]!.push(...res.lines);
        return "ended";
      })().catch((e: unknown) => e)
    );
    // The backlog first: the phone's boot lines, with the package of each line's process told (none for init).
    for (const lines of seen) await waitFor("the backlog through B", async () => (lines.some((l) => l.message === "System now ready") ? true : undefined));
    expect(await metric(B, "farm_live_logcats")).toBe(1);
    expect(await metric(B, "farm_live_logcat_viewers")).toBe(2);
    expect(await metric(A, "farm_live_logcats")).toBe(1);
    expect(await metric(A, "farm_live_logcat_viewers")).toBe(1);

    // A line written now, through B, reaches both readers.
    expect((await farm(["shell", "--device", serial, "--", "log", "-t", "x", "hello through B"], { ...lab.envs[B], FARM_TOKEN: alice, FARM_LEASE: lease })).code).toBe(0);
    for (const lines of seen) await waitFor("the new line through B", async () => (lines.some((l) => l.tag === "x" && l.message === "hello through B") ? true : undefined));

    // Someone else's log, through either replica: refused.
    for (const replica of [B, A]) {
      const refused = await (async () => {
        for await (const _ of clientOf(LogcatService, replica, bob).watchLogcat({ target: { serial } })) return "read";
        return "ended";
      })().catch((e: unknown) => e);
      expect(toErrorReport(refused)).toMatchObject({ code: "LEASE_HELD_BY_OTHER" });
    }

    // The lease's end ends both reads with why, and the phone's logcat on A.
    await release(lease);
    for (const end of reads) expect(toErrorReport(await end)).toMatchObject({ code: expect.stringMatching(/^LEASE_(RELEASED|EXPIRED)$/) as unknown });
    await waitFor("the phone's logcat ended on A", async () => ((await metric(A, "farm_live_logcats")) === 0 ? true : undefined));
    await waitFor("no logcat feed left on B", async () => ((await metric(B, "farm_live_logcats")) === 0 ? true : undefined));
  });

  it("shows the grid's thumbnail of the phone through B: the holder's and an admin's, from B's one relayed screen feed", async () => {
    const lease = await aliceLease();
    const stops = [new AbortController(), new AbortController()];
    const views = [
      clientOf(LiveScreenService, B, alice, lease).watchScreen({ target: { serial }, thumbnail: true }, { signal: stops[0]!.signal })[Symbol.asyncIterator](),
      clientOf(LiveScreenService, B, lab.admin).watchScreen({ target: { serial }, thumbnail: true }, { signal: stops[1]!.signal })[Symbol.asyncIterator](),
    ];
    for (const v of views) {
      expect((await v.next()).value?.event?.kind.case).toBe("format");
      expect((await v.next()).value?.event?.kind).toMatchObject({ case: "frame", value: { key: true } });
    }
    expect(await metric(B, "farm_live_screens")).toBe(1);
    expect(await metric(B, "farm_live_screen_viewers")).toBe(2);
    expect(await metric(A, "farm_live_screen_viewers")).toBe(1);
    for (const s of stops) s.abort();
    for (const v of views) await v.return?.(undefined).catch(() => undefined);
    await release(lease);
    await waitFor("no screen feed left on B", async () => ((await metric(B, "farm_live_screens")) === 0 ? true : undefined));
  });

  it("runs the Logs and Shell tabs of B's dashboard: a line written through B shows, and `getprop ro.product.model` answers the phone's model", async () => {
    const lease = await aliceLease();
    const logs = await onTabThroughB("logs", lease);
    await expect.poll(() => logs.locator("[data-cell=\"log-rows\"]").textContent(), { timeout: 20_000 }).toContain("System now ready");
    expect((await farm(["shell", "--device", serial, "--", "log", "-t", "x", "tab through B"], { ...lab.envs[B], FARM_TOKEN: alice, FARM_LEASE: lease })).code).toBe(0);
    await expect.poll(() => logs.locator("[data-cell=\"log-rows\"]").textContent(), { timeout: 20_000 }).toContain("x: tab through B");
    await logs.screenshot({ path: join(artifacts, "logs-through-b.png"), fullPage: true });
    await logs.context().close();

    const shell = await onTabThroughB("shell", lease);
    await expect.poll(() => shell.locator("[data-cell=\"shell-status\"]").textContent(), { timeout: 20_000 }).toMatch(/^Shell on /);
    await shell.locator(".xterm").click();
    await shell.keyboard.type("getprop ro.product.model\r");
    const rows = shell.locator(".xterm-rows");
    await expect.poll(async () => ((await rows.textContent()) ?? "").split("getprop ro.product.model")[1] ?? "", { timeout: 20_000 }).toContain(lab.phone.model);
    expect(lab.phone.model).not.toBe("");
    await shell.screenshot({ path: join(artifacts, "shell-through-b.png"), fullPage: true });
    await shell.context().close();
    await release(lease);
  });
});
