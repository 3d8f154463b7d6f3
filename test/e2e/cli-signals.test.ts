/**
 * SIGINT and SIGTERM end every command promptly, as real CLI processes: a
 * long shell command is cancelled (130/143), `farm wait` stops polling, and
 * `farm lease run` hands the signal to its command and still releases its
 * lease on the way out. The cancel reaches the agent: a change still waiting
 * for a busy phone never runs once its caller has gone.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm, waitFor } from "../support/farm-process.js";
import { startCli as run } from "../support/running-cli.js";
import { startLab, type Lab } from "../support/lab.js";
import { ROOT } from "../devsim/index.js";

let lab: Lab;
let serial: string;

beforeAll(async () => {
  lab = await startLab("cli-signals");
  serial = (await lab.addDevice({ serialno: "SIGNAL01" })).serial;
}, 180_000);

afterAll(async () => {
  await lab?.stop();
});

async function lease(on = serial): Promise<string> {
  const r = await farm(["lease", "acquire", "--device", on, "--ttl", "2m"], lab.env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return (r.json["lease"] as { token: string }).token;
}

describe("a signal ends a command promptly", () => {
  it("farm shell blocked in a long device command: SIGTERM cancels the call, exit 143", async () => {
    const token = await lease();
    try {
      const env = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial };
      const shell = run(["shell", "--timeout", "600000", "--", "sleep", "600"], env);
      // Running on the phone: the agent holds the phone's lock for it.
      await waitFor("the sleep on the phone", async () => {
        const s = await farm(["device", "ownership", "status", "--device", serial], lab.env);
        return JSON.stringify(s.json["ownership"]).includes("sleep 600") ? true : undefined;
      }, { timeoutMs: 30_000 });
      shell.proc.kill("SIGTERM");
      // Ends by itself (the test's timeout bounds it): not after the command's 600 s.
      const end = await shell.exited;
      expect(end).toEqual({ code: 143, signal: null });
      // Sent before the signal: whether the phone ran it is not known, and the envelope says so.
      expect(JSON.parse(shell.stdout().trim())).toMatchObject({ ok: false, code: "CALL_CANCELLED", dispatched: null, ambiguous: true });
    } finally {
      await farm(["lease", "release", "--lease", token], lab.env);
    }
  }, 120_000);

  it("a change waiting for a busy phone: SIGTERM ends it, the agent drops it, and it never runs on the phone", async () => {
    // A phone of its own: the sleep of the test above may still hold the first one.
    const { device: phone, serial: busySerial } = await lab.addDevice({ serialno: "SIGNAL02" });
    const token = await lease(busySerial);
    const env = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: busySerial };
    const ownership = async () => (await farm(["device", "ownership", "status", "--device", busySerial], lab.env)).json["ownership"] as { locked: boolean; waiting: number; recent: { request: string }[] };
    try {
      // The phone is busy with a job that ends when the test writes busy.go.
      const busy = run(["shell", "--timeout", "600000", "--", "until [ -e /data/local/tmp/busy.go ]; do sleep 0.1; done; echo busy-done"], env);
      await waitFor("the busy job to hold the phone", async () => (JSON.stringify(await ownership()).includes("busy.go") ? true : undefined), { timeoutMs: 30_000 });
      const queued = run(["shell", "--timeout", "600000", "--", "echo ran > /data/local/tmp/cancelled.txt"], env);
      // At the agent, waiting for the phone's lock.
      await waitFor("the second change to wait for the phone", async () => ((await ownership()).waiting === 1 ? true : undefined), { timeoutMs: 30_000 });
      queued.proc.kill("SIGTERM");
      expect(await queued.exited).toEqual({ code: 143, signal: null });
      // The agent was told: the waiter is gone and its call's outcome is on record, while the phone is still busy.
      const entry = await waitFor("the cancelled call's outcome in the activity log", async () => {
        const r = await farm(["activity", "--device", busySerial], lab.env);
        return (r.json["entries"] as { command: string; outcome: string; detail: string }[]).find((e) => e.command === "runShell" && e.detail.includes("cancelled.txt"));
      }, { timeoutMs: 60_000 });
      expect(entry.outcome).toBe("CALL_CANCELLED");
      expect((await ownership()).waiting).toBe(0);
      // The phone comes free: nothing of the cancelled call runs then.
      phone.state.fs.writeFile("/data/local/tmp/busy.go", Buffer.from("go\n"), ROOT);
      expect(await busy.exited).toEqual({ code: 0, signal: null });
      expect(JSON.parse(busy.stdout().trim())).toMatchObject({ ok: true, stdout: "busy-done\n" });
      const after = await farm(["shell", "--", "echo", "after"], env);
      expect(after.code, after.stdout + after.stderr).toBe(0);
      expect(phone.state.fs.exists("/data/local/tmp/cancelled.txt", ROOT)).toBe(false);
      expect(JSON.stringify((await ownership()).recent)).not.toContain("cancelled.txt");
    } finally {
      await farm(["lease", "release", "--lease", token], lab.env);
    }
  }, 180_000);

  it("farm wait polling for an element that never comes: SIGINT stops it, exit 130", async () => {
    const waiting = run(["wait", "--device", serial, "--text", "Never shown", "--timeout", "10m", "--verbose"], lab.env);
    // A poll has been answered: the wait is under way.
    await waitFor("a poll", () => {
      if (waiting.proc.exitCode !== null) throw new Error(`farm wait exited ${waiting.proc.exitCode}: ${waiting.stdout()} ${waiting.stderr()}`);
      return /GetUiTree x-request-id=\S+ ok/.test(waiting.stderr()) ? true : undefined;
    }, { timeoutMs: 30_000 });
    waiting.proc.kill("SIGINT");
    const end = await waiting.exited;
    expect(end).toEqual({ code: 130, signal: null });
    expect(JSON.parse(waiting.stdout().trim())).toMatchObject({ ok: false });
  }, 120_000);

  it("farm lease run: SIGTERM goes to the command, its own exit code is kept, and the lease is released", async () => {
    const script = `trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done`;
    const leased = run(["lease", "run", "--device", serial, "--ttl", "2m", "--", "sh", "-c", script], lab.env);
    await waitFor("the command to start", () => (leased.stdout().includes("ready") ? true : undefined), { timeoutMs: 30_000 });
    leased.proc.kill("SIGTERM");
    const end = await leased.exited;
    expect(end).toEqual({ code: 7, signal: null });
    expect(leased.stdout()).toContain("got-term");
    // The summary on stdout (JSON output) records the command's code.
    expect(JSON.parse(leased.stdout().trim().split("\n").pop() ?? "{}")).toMatchObject({ ok: false, exitCode: 7 });
    const list = await farm(["lease", "list"], lab.env);
    expect((list.json["leases"] as { serial: string }[]).filter((l) => l.serial === serial)).toEqual([]);
  }, 120_000);
});
