/**
 * Evidence quotas that parallel captures cannot race, end to end: `farm
 * standalone` with --evidence-quota and --captures-per-user, simulated
 * phones whose screenshots hang while a test holds them, and the CLI as
 * separate users. A capture reserves its bundle's largest size (100 MiB for
 * a still), or what is left of the quota when that is less, before it
 * reaches the phone, and its bundle must fit that; what reached the phone
 * is counted from the phone's side (its adb OPENs), not guessed from timing.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimDevice } from "../devsim/index.js";
import { farm, type CliResult } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

const SCREENCAP = "shell,v2,raw:screencap";

interface HungPhone {
  device: SimDevice;
  serial: string;
  /** Captures that reached the phone (opened its screenshot). */
  readonly reached: number;
  /** Resolves once `n` captures reached the phone. */
  untilReached(n: number): Promise<void>;
}

/** A phone whose screenshots hang (until it vanishes), counting the captures that reach it. */
async function hungPhone(lab: Lab, serialno: string): Promise<HungPhone> {
  let reached = 0;
  const waiting: { n: number; resolve: () => void }[] = [];
  const trace = (line: string) => {
    if (!line.startsWith("<- OPEN(") || !line.includes(`"${SCREENCAP}`)) return;
    reached++;
    for (const w of waiting.filter((x) => x.n <= reached)) w.resolve();
  };
  const p = await lab.addDevice({ serialno, trace });
  p.device.faults.set({ hangServices: [SCREENCAP] });
  return {
    ...p,
    get reached() {
      return reached;
    },
    untilReached: (n) => (reached >= n ? Promise.resolve() : new Promise((resolve) => waiting.push({ n, resolve }))),
  };
}

/** The results of calls in flight as they settle; `until(n)` resolves once n have. */
function settling(calls: Promise<CliResult>[]): { settled: CliResult[]; until(n: number): Promise<CliResult[]>; all: Promise<CliResult[]> } {
  const settled: CliResult[] = [];
  const waiting: { n: number; resolve: (r: CliResult[]) => void }[] = [];
  const all = Promise.all(
    calls.map(async (c) => {
      const r = await c;
      settled.push(r);
      for (const w of waiting.filter((x) => x.n <= settled.length)) w.resolve([...settled]);
      return r;
    }),
  );
  return { settled, all, until: (n) => (settled.length >= n ? Promise.resolve([...settled]) : new Promise((resolve) => waiting.push({ n, resolve }))) };
}

async function userEnv(lab: Lab, name: string): Promise<NodeJS.ProcessEnv> {
  const r = await farm(["token", "create", "--kind", "user", "--name", name], lab.env);
  if (r.code !== 0) throw new Error(`token ${name}: ${r.stdout}${r.stderr}`);
  return { ...lab.env, FARM_COORDINATOR: String(lab.standalone.ready["url"]), FARM_TOKEN: String(r.json["token"]) };
}

const capture = (serial: string, env: NodeJS.ProcessEnv, timeoutMs = 120_000) => farm(["evidence", "capture", "--device", serial, "--timeout", String(timeoutMs)], env);

async function storedBundles(lab: Lab, serial: string): Promise<{ evidenceId: string; totalBytes: number }[]> {
  const r = await farm(["evidence", "list", "--device", serial], lab.env);
  return (r.json["bundles"] as { evidenceId: string; totalBytes: number | string }[]).map((b) => ({ evidenceId: b.evidenceId, totalBytes: Number(b.totalBytes) }));
}

describe("the issue's example: --evidence-quota 600K and ten parallel captures of one user", () => {
  const QUOTA = 600 * 1024;
  let lab: Lab;
  let alice: NodeJS.ProcessEnv;

  beforeAll(async () => {
    lab = await startLab("evidence-quota-600k", { args: ["--evidence-quota", "600K", "--captures-per-user", "10"] });
    alice = await userEnv(lab, "alice");
  });
  afterAll(async () => {
    await lab?.stop();
  });

  it("stores at most 600K, lets the captures that fit succeed, and refuses the others QUOTA_EXCEEDED", async () => {
    const { serial } = await lab.addDevice({ serialno: "QUOTA600K1" });
    const results = await Promise.all(Array.from({ length: 10 }, () => capture(serial, alice)));
    const ok = results.filter((r) => r.json["ok"] === true);
    // A still's largest bundle (100 MiB) is far over 600K: each holds what is left, so some fit.
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const r of ok) expect(r.json).toMatchObject({ status: "complete" });
    for (const r of results.filter((x) => !ok.includes(x))) {
      expect(r.json).toMatchObject({ ok: false, code: "QUOTA_EXCEEDED", field: "quota" });
      expect(String(r.json["message"])).toContain("alice");
      expect(String(r.json["message"])).toContain("--evidence-quota");
    }
    const stored = await storedBundles(lab, serial);
    expect(stored.map((b) => b.evidenceId).sort()).toEqual(ok.map((r) => String(r.json["evidenceId"])).sort());
    expect(stored.reduce((n, b) => n + b.totalBytes, 0)).toBeLessThanOrEqual(QUOTA);
  });

  it("refuses a bundle larger than what was left when its capture started, and never stores it later", async () => {
    const { serial } = await lab.addDevice({ serialno: "QUOTA600K2" });
    // One at a time until one is refused: a still of this phone is over 100K, so at most six fit.
    let refused: CliResult | undefined;
    for (let i = 0; i < 7 && !refused; i++) {
      const r = await capture(serial, alice);
      if (r.json["ok"] === true) expect(r.json).toMatchObject({ status: "complete" });
      else refused = r;
    }
    expect(refused?.json).toMatchObject({ ok: false, code: "QUOTA_EXCEEDED", field: "quota" });
    expect(String(refused?.json["message"])).toContain("alice");
    expect(String(refused?.json["message"])).toContain("--evidence-quota");
    // Nothing of it is left staged on the agent to be sent again once its reservation is gone.
    expect((await readdir(join(String(lab.env["FARM_HOME"]), "agent", "staging")).catch(() => [])).filter((n) => /^[0-9a-f-]{36}$/.test(n))).toEqual([]);
    const all = [...(await storedBundles(lab, serial)), ...(await storedBundles(lab, "QUOTA600K1"))];
    expect(all.reduce((n, b) => n + b.totalBytes, 0)).toBeLessThanOrEqual(QUOTA);
  });
});

describe("an evidence quota of 350M: three stills' largest bundles and half of a fourth", () => {
  const QUOTA = 350 * 1024 * 1024;
  let lab: Lab;
  let alice: NodeJS.ProcessEnv;

  beforeAll(async () => {
    lab = await startLab("evidence-quota", { args: ["--evidence-quota", "350M", "--captures-per-user", "10"] });
    alice = await userEnv(lab, "alice");
  });
  afterAll(async () => {
    await lab?.stop();
  });

  it("takes four of ten parallel captures (the fourth holds the 50M left); the other six are refused QUOTA_EXCEEDED before the phone", async () => {
    const phone = await hungPhone(lab, "QUOTA00001");
    const calls = settling(Array.from({ length: 10 }, () => capture(phone.serial, alice)));
    // Six answers come while four captures hold the phone, or a fifth reaches it.
    const first = await Promise.race([calls.until(6).then(() => "six answered"), phone.untilReached(5).then(() => "a fifth capture reached the phone")]);
    expect(first).toBe("six answered");
    const refused = calls.settled.slice(0, 6);
    for (const r of refused) {
      expect(r.json).toMatchObject({ ok: false, code: "QUOTA_EXCEEDED", field: "quota" });
      expect(String(r.json["message"])).toContain("alice");
      expect(String(r.json["message"])).toContain("--evidence-quota");
    }
    await phone.untilReached(4);
    // The held four end with the phone (their reservations with them).
    await phone.device.vanish();
    const rest = (await calls.all).filter((r) => !refused.includes(r));
    expect(rest).toHaveLength(4);
    for (const r of rest) expect(r.json["code"]).not.toBe("QUOTA_EXCEEDED");
    expect(phone.reached).toBe(4);
    // What the failed four stored (their failed bundles) fits what they held.
    const stored = await storedBundles(lab, phone.serial);
    expect(stored.length).toBeLessThanOrEqual(4);
    expect(stored.reduce((n, b) => n + b.totalBytes, 0)).toBeLessThanOrEqual(QUOTA);
  });

  it("gives a capture's reservation back when it fails and when it is stored", async () => {
    // After four failed captures (above): three at once hold their largest bundles again.
    const { serial } = await lab.addDevice({ serialno: "QUOTA00002" });
    const three = await Promise.all([capture(serial, alice), capture(serial, alice), capture(serial, alice)]);
    for (const r of three) expect(r.json).toMatchObject({ ok: true, status: "complete" });
    // Stored: what they hold is their real size, not 100 MiB each, so another three fit.
    const again = await Promise.all([capture(serial, alice), capture(serial, alice), capture(serial, alice)]);
    for (const r of again) expect(r.json).toMatchObject({ ok: true, status: "complete" });
    const stored = await storedBundles(lab, serial);
    expect(stored).toHaveLength(6);
    expect(stored.reduce((n, b) => n + b.totalBytes, 0)).toBeLessThanOrEqual(QUOTA);
  });
});

describe("captures in flight per user (default 4)", () => {
  let lab: Lab;

  beforeAll(async () => {
    lab = await startLab("captures-per-user");
  });
  afterAll(async () => {
    await lab?.stop();
  });

  it("refuses a user's fifth concurrent capture, naming the limit, while another user's passes", async () => {
    const alice = await userEnv(lab, "alice");
    const bob = await userEnv(lab, "bob");
    const hung = await hungPhone(lab, "LIMIT00001");
    const free = await lab.addDevice({ serialno: "LIMIT00002" });
    const four = settling(Array.from({ length: 4 }, () => capture(hung.serial, alice)));
    await hung.untilReached(4);
    // A short budget: were it let through, it would end at its own deadline, not hang.
    const fifth = await capture(free.serial, alice, 1_000);
    expect(fifth.json).toMatchObject({ ok: false, code: "RESOURCE_EXHAUSTED", field: "captures_per_user" });
    expect(String(fifth.json["message"])).toContain("--captures-per-user");
    expect(String(fifth.json["message"])).toMatch(/limit per user is 4\b/);
    expect(await capture(free.serial, bob)).toMatchObject({ json: { ok: true, status: "complete" } });
    expect(four.settled).toEqual([]);
    await hung.device.vanish();
    await four.all;
    // The four settled (failed): alice may capture again.
    expect(await capture(free.serial, alice)).toMatchObject({ json: { ok: true, status: "complete" } });
  });
});
