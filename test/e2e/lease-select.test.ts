/**
 * Lease selectors against the farm's phones, end to end (standalone, real
 * adb server, simulated phones): a selector no phone can ever match is
 * refused at once; one a busy phone matches waits for it; a physical id as
 * `farm devices` shows it (cut, with …) is taken, an ambiguous one refused,
 * by lease commands and as the --device of device commands, the
 * interactive shell, `farm adb connect` and a video recording included.
 */
import { spawn } from "node:child_process";
import { spawn as ptySpawn } from "node-pty";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { runAdb, startAdbServer } from "../devsim/index.js";
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

  it("takes a physical id prefix for the interactive shell, `farm adb connect` and a video recording", async () => {
    const beta = phones[2] as { serial: string; physicalId: string };
    const prefix = beta.physicalId.slice(0, 12);
    const leased = await farm(["lease", "acquire", "--device", prefix, "--wait", "0s"], lab.env);
    expect(leased.json, leased.stdout).toMatchObject({ ok: true, lease: { serial: beta.serial } });
    const token = (leased.json["lease"] as { token: string }).token;
    const env = { ...lab.env, FARM_LEASE: token };
    const user = await startAdbServer();
    try {
      // The interactive shell (no command: a terminal), in a pseudo-terminal.
      const term = ptySpawn(process.execPath, [farmBin, "shell", "--device", prefix], { cols: 100, rows: 30, env: { ...process.env, ...env, TERM: "xterm" } as Record<string, string> });
      onTestFinished(() => term.kill("SIGKILL"));
      let screen = "";
      term.onData((d) => (screen += d));
      const exit = new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
      const seen = (text: string) => waitFor(`"${text}" on the terminal`, () => (screen.includes(text) ? true : undefined), { intervalMs: 20 });
      await seen("$ ");
      // Only the phone's shell expands $(…): the echo of what was typed does not show the model.
      term.write("echo model-$(getprop ro.product.model)\r");
      await seen("model-Sel Beta");
      term.write("exit 3\r");
      expect(await exit).toBe(3);

      // A tunnel into the user's own adb server.
      const connected = await farm(["adb", "connect", "--device", prefix], { ...env, ANDROID_ADB_SERVER_PORT: String(user.port) });
      expect(connected.json, connected.stdout + connected.stderr).toMatchObject({ ok: true, device: beta.serial });
      const local = String(connected.json["serial"]);
      const model = await waitFor("the tunnelled phone to answer in the user's adb", async () => {
        const r = await runAdb(user.port, ["-s", local, "shell", "getprop", "ro.product.model"]);
        return r.code === 0 ? r.stdout.trim() : undefined;
      });
      expect(model).toBe("Sel Beta");
      expect((await farm(["adb", "disconnect", "--all"], { ...env, ANDROID_ADB_SERVER_PORT: String(user.port) })).json).toMatchObject({ ok: true });

      // A screen recording of this phone, left to end at its time limit (an idle screen may make it VIDEO_EMPTY: the phone is what counts here).
      const started = await farm(["evidence", "video", "start", "--device", prefix, "--duration-seconds", "1", "--size", "216x480"], env);
      expect(started.json, started.stdout + started.stderr).toMatchObject({ ok: true });
      const id = String(started.json["sessionId"]);
      const stored = await waitFor("the recording to be stored", async () => {
        const r = await farm(["evidence", "video", "status", "--recording", id], env);
        return r.json["stored"] === true ? r.json : undefined;
      }, { timeoutMs: 60_000, intervalMs: 250 });
      expect(stored).toMatchObject({ serial: beta.serial });

      // Each ran on the phone the prefix names, recorded under its serial.
      const activity = (await farm(["activity", "--device", beta.serial], lab.env)).json["entries"] as { command: string; serial: string; outcome: string }[];
      for (const command of ["openShell", "adbTunnel", "startVideo"]) {
        expect(activity.find((e) => e.command === command), `${command} in ${JSON.stringify(activity.map((e) => e.command))}`).toMatchObject({ serial: beta.serial });
      }
    } finally {
      await user.stop();
      await farm(["lease", "release", "--lease", token], lab.env);
    }
  }, 180_000);

  it("refuses an ambiguous prefix with DEVICE_AMBIGUOUS, exit 64, listing the candidates", async () => {
    const r = await farmProcess(["lease", "acquire", "--physical-id", "pd-", "--wait", "10s"], lab.env);
    expect(r.json).toMatchObject({ ok: false, code: "DEVICE_AMBIGUOUS", field: "physical-id" });
    for (const p of phones) expect(r.json["message"]).toContain(p.physicalId);
    expect(r.code).toBe(64);
  });
});
