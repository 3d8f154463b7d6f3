/**
 * `--request-id` across coordinator replicas: two `farm coordinator`
 * processes on one PostgreSQL database, the agent attached to replica 0. A
 * retry through replica 1 gets the first call's answer from the shared
 * database instead of running the command again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";

let lab: ReplicaLab | undefined;

beforeAll(async () => {
  lab = await startReplicaLab("replica-request-id");
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("request ids across coordinator replicas", () => {
  it("answers a retry through the other replica with the first result, and refuses other content there", async () => {
    const { serial, envs } = lab as ReplicaLab;
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], envs[0]);
    expect(acquired.json, acquired.stderr).toMatchObject({ ok: true });
    const lease = acquired.json["lease"] as { token: string; leaseId: string };
    const on = (i: number) => ({ ...envs[i], FARM_LEASE: lease.token, FARM_DEVICE: serial });
    // $$ (a new shell's pid): a command run twice would answer differently, not only under another action id.
    const command = ["shell", "--request-id", "retry-1", "--", "echo", "once-$$"];
    const first = await farm(command, on(0));
    expect(first.json, first.stderr).toMatchObject({ ok: true, exitCode: 0 });
    const retry = await farm(command, on(1));
    expect(retry.json, retry.stderr).toMatchObject({ ok: true, stdout: first.json["stdout"], actionId: first.json["actionId"] });
    const other = await farm(["shell", "--request-id", "retry-1", "--", "echo", "twice"], on(1));
    expect(other.json).toMatchObject({ ok: false, code: "IDEMPOTENCY_CONFLICT", field: "request-id", dispatched: false, ambiguous: false });
    const activity = await farm(["activity", "--device", serial], envs[1]);
    const entries = activity.json["entries"] as { command: string; outcome: string; requestId?: string }[];
    expect(entries.filter((e) => e.command === "runShell" && e.outcome === "ok")).toHaveLength(1);
    expect((await farm(["lease", "release"], on(1))).code).toBe(0);
  });
});
