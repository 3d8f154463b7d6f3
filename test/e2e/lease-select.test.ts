/**
 * Lease selectors against the farm's phones, end to end (standalone, real
 * adb server, simulated phones): a selector no phone can ever match is
 * refused at once; one a busy phone matches waits for it; a physical id as
 * `farm devices` shows it (cut, with …) is taken, an ambiguous one refused,
 * by lease commands and as the --device of device commands.
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm, farmBin, farmProcess, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
/** Serial and physical id of each phone: two "Sel Alpha", one "Sel Beta". */
let phones: { serial: string; physicalId: string }[] = [];

interface Listed {
  serial: string;
  properties: { physicalId: string };
}

beforeAll(async () => {
  lab = await startLab("lease-select");
  const serials: string[] = [];
  for (const [i, model] of ["Sel Alpha", "Sel Alpha", "Sel Beta"].entries()) {
    serials.push((await lab.addDevice({ serialno: `SELECT${i}`, props: { "ro.product.model": model } })).serial);
  }
  phones = await waitFor("every phone's identity read", async () => {
    const listed = (await farm(["devices"], lab.env)).json["devices"] as Listed[] | undefined;
    const found = serials.map((serial) => ({ serial, physicalId: listed?.find((d) => d.serial === serial)?.properties.physicalId ?? "" }));
    return found.every((p) => p.physicalId !== "") ? found : undefined;
  }, { timeoutMs: 60_000 });
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

const queueOf = async () => (await farm(["lease", "list"], lab.env)).json["queue"] as unknown[];

describe("lease selectors", () => {
  it("refuses at once, exit 69, a model or label no phone in the farm has, naming what there is", async () => {
    const model = await farmProcess(["lease", "acquire", "--model", "NoSuchPhone", "--wait", "8s"], lab.env);
    expect(model.json).toMatchObject({ ok: false, code: "NO_DEVICE_MATCHES", field: "model" });
    expect(model.json["message"]).toContain("models: Sel Alpha, Sel Beta");
    expect(model.code).toBe(69);
    // Unfixed, this waited the whole 15 minutes.
    const label = await farm(["lease", "acquire", "--label", "pool=nightly", "--wait", "15m"], lab.env);
    expect(label.json).toMatchObject({ ok: false, code: "NO_DEVICE_MATCHES", field: "label" });
    expect(label.json["message"]).toContain("pool=nightly");
    expect(await queueOf()).toEqual([]);
  }, 60_000);

  it("keeps waiting when a matching phone exists but is busy, and grants it on release", async () => {
    const beta = phones[2] as { serial: string; physicalId: string };
    expect((await farm(["device", "label", "set", beta.serial, "pool=ci"], lab.env)).code).toBe(0);
    const held = await farm(["lease", "acquire", "--label", "pool=ci", "--ttl", "2m"], lab.env);
    const heldLease = held.json["lease"] as { token: string; serial: string };
    expect(heldLease.serial).toBe(beta.serial);
    const waiter = spawn(process.execPath, [farmBin, "lease", "acquire", "--label", "pool=ci", "--wait", "60s", "--output", "json"], { env: { ...process.env, ...lab.env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    waiter.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    const exited = new Promise<number | null>((resolve) => waiter.once("exit", resolve));
    await waitFor("the waiter queued", async () => ((await queueOf()).length === 1 ? true : undefined));
    expect((await farm(["lease", "release", "--lease", heldLease.token], lab.env)).code).toBe(0);
    expect(await exited).toBe(0);
    const granted = JSON.parse(out.trim().split("\n").pop() ?? "{}") as { lease: { serial: string; token: string } };
    expect(granted.lease.serial).toBe(beta.serial);
    await farm(["lease", "release", "--lease", granted.lease.token], lab.env);
  }, 90_000);

  it("takes a physical id as `farm devices` shows it, cut with …, in --physical-id and --device", async () => {
    const alpha = phones[0] as { serial: string; physicalId: string };
    const table = await farm(["devices"], { ...lab.env, FARM_OUTPUT: "pretty" });
    const row = table.stdout.split("\n").find((l) => l.includes(` ${alpha.serial} `));
    const shown = row?.trim().split(/\s+/u)[0] ?? "";
    expect(shown.endsWith("…")).toBe(true);
    expect(alpha.physicalId.startsWith(shown.slice(0, -1))).toBe(true);
    for (const args of [["--physical-id", shown], ["--device", shown.slice(0, -1)]]) {
      const r = await farm(["lease", "acquire", ...args, "--wait", "0s"], lab.env);
      expect(r.json, args.join(" ")).toMatchObject({ ok: true, lease: { physicalId: alpha.physicalId } });
      await farm(["lease", "release", "--lease", (r.json["lease"] as { token: string }).token], lab.env);
    }
  });

  it("takes a physical id, cut as `farm devices` shows it, as --device of a device command (shell, screenshot, session, evidence)", async () => {
    const beta = phones[2] as { serial: string; physicalId: string };
    const shown = `${beta.physicalId.slice(0, 15)}…`;
    const leased = await farm(["lease", "acquire", "--physical-id", shown, "--wait", "0s"], lab.env);
    expect(leased.json, leased.stdout).toMatchObject({ ok: true, lease: { serial: beta.serial } });
    const token = (leased.json["lease"] as { token: string }).token;
    const env = { ...lab.env, FARM_LEASE: token };
    try {
      const shell = await farm(["shell", "--device", shown, "--", "getprop", "ro.product.model"], env);
      expect(shell.json, shell.stdout + shell.stderr).toMatchObject({ ok: true, stdout: "Sel Beta\n" });
      const file = `${lab.dir.path}/by-prefix.png`;
      const shot = await farm(["screenshot", "--device", beta.physicalId.slice(0, 10), file], env);
      expect(shot.json, shot.stdout + shot.stderr).toMatchObject({ ok: true, file });
      const session = await farm(["session", "start", "--device", shown, "--name", "by prefix"], env);
      expect(session.json, session.stdout + session.stderr).toMatchObject({ ok: true, session: { serial: beta.serial } });
      const capture = await farm(["evidence", "capture", "--device", shown], env);
      expect(capture.json, capture.stdout + capture.stderr).toMatchObject({ ok: true, status: "complete" });
      // Each on the phone, recorded under the serial it is reported on.
      const activity = (await farm(["activity", "--device", beta.serial], lab.env)).json["entries"] as { command: string; serial: string; outcome: string }[];
      for (const command of ["runShell", "takeScreenshot", "startSession", "captureEvidence"]) {
        expect(activity.find((e) => e.command === command), command).toMatchObject({ serial: beta.serial, outcome: "ok" });
      }
    } finally {
      await farm(["lease", "release", "--lease", token], lab.env);
    }
    // Two phones' ids share "pd-": refused before anything is sent, naming both.
    const ambiguous = await farmProcess(["shell", "--device", "pd-", "--", "true"], lab.env);
    expect(ambiguous.json).toMatchObject({ ok: false, code: "DEVICE_AMBIGUOUS", field: "device", dispatched: false });
    for (const p of phones) expect(ambiguous.json["message"]).toContain(p.physicalId);
    expect(ambiguous.code).toBe(64);
  });

  it("refuses an ambiguous prefix with DEVICE_AMBIGUOUS, exit 64, listing the candidates", async () => {
    const r = await farmProcess(["lease", "acquire", "--physical-id", "pd-", "--wait", "10s"], lab.env);
    expect(r.json).toMatchObject({ ok: false, code: "DEVICE_AMBIGUOUS", field: "physical-id" });
    for (const p of phones) expect(r.json["message"]).toContain(p.physicalId);
    expect(r.code).toBe(64);
  });
});
