/**
 * Cancel across coordinator replicas: two `farm coordinator` processes on
 * one PostgreSQL database, the agent attached to replica 0, the caller on
 * replica 1. A caller that goes away while its call waits for a busy phone
 * is heard by the agent through the replica holding it (CancelAgentCall),
 * as on one coordinator: the call ends CALL_CANCELLED and never runs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startCli as run } from "../support/running-cli.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";

let lab: ReplicaLab | undefined;

beforeAll(async () => {
  lab = await startReplicaLab("replica-cancel");
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("cancel across coordinator replicas", () => {
  it("a change waiting for a busy phone, sent through the replica not holding its agent: SIGTERM ends it, the agent drops it, and it never runs", async () => {
    const { serial, envs, phone } = lab as ReplicaLab;
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], envs[0]);
    expect(acquired.json, acquired.stderr).toMatchObject({ ok: true });
    const token = (acquired.json["lease"] as { token: string }).token;
    const on = (i: number) => ({ ...envs[i], FARM_LEASE: token, FARM_DEVICE: serial });
    const ownership = async () => (await farm(["device", "ownership", "status", "--device", serial], envs[0])).json["ownership"] as { waiting: number; recent: { request: string }[] };
    try {
      // The phone is busy with a job that ends when the test writes busy.go.
      const busy = run(["shell", "--timeout", "600000", "--", "until [ -e /data/local/tmp/busy.go ]; do sleep 0.1; done; echo busy-done"], on(0));
      await waitFor("the busy job to hold the phone", async () => (JSON.stringify(await ownership()).includes("busy.go") ? true : undefined), { timeoutMs: 30_000 });
      // Through replica 1: the call travels to replica 0 (CallAgent) and waits at the agent for the phone's lock.
      const queued = run(["shell", "--timeout", "600000", "--", "echo ran > /data/local/tmp/cancelled.txt"], on(1));
      await waitFor("the relayed change to wait for the phone", async () => ((await ownership()).waiting === 1 ? true : undefined), { timeoutMs: 30_000 });
      queued.proc.kill("SIGTERM");
      expect(await queued.exited).toEqual({ code: 143, signal: null });
      // The agent was told through replica 0, and the outcome came back to replica 1's record while the phone is still busy.
      const entry = await waitFor("the cancelled call's outcome in the activity log", async () => {
        const r = await farm(["activity", "--device", serial], envs[1]);
        return (r.json["entries"] as { command: string; outcome: string; detail: string }[]).find((e) => e.command === "runShell" && e.detail.includes("cancelled.txt"));
      }, { timeoutMs: 60_000 });
      expect(entry.outcome).toBe("CALL_CANCELLED");
      expect((await ownership()).waiting).toBe(0);
      // The phone comes free: nothing of the cancelled call runs then.
      phone.state.fs.writeFile("/data/local/tmp/busy.go", Buffer.from("go\n"), ROOT);
      expect(await busy.exited).toEqual({ code: 0, signal: null });
      expect(JSON.parse(busy.stdout().trim())).toMatchObject({ ok: true, stdout: "busy-done\n" });
      const after = await farm(["shell", "--", "echo", "after"], on(1));
      expect(after.code, after.stdout + after.stderr).toBe(0);
      expect(phone.state.fs.exists("/data/local/tmp/cancelled.txt", ROOT)).toBe(false);
      expect(JSON.stringify((await ownership()).recent)).not.toContain("cancelled.txt");
    } finally {
      await farm(["lease", "release", "--lease", token], envs[0]);
    }
  }, 240_000);
});
