/**
 * `--request-id` across coordinator replicas: two `farm coordinator`
 * processes on one PostgreSQL database, the agent attached to replica 0. A
 * retry through replica 1 gets the first call's answer from the shared
 * database instead of running the command again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm, waitFor } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";

let lab: ReplicaLab | undefined;

interface ActionRow {
  actionId: string;
  state: string;
}

/** The phone's recent actions in the agent's journal. */
async function actions(env: NodeJS.ProcessEnv | undefined): Promise<ActionRow[]> {
  const status = await farm(["device", "ownership", "status", "--device", (lab as ReplicaLab).serial], env);
  return ((status.json["ownership"] ?? { recent: [] }) as { recent: ActionRow[] }).recent;
}

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

  it("tells a retry through the other replica that the first call has no outcome yet, runs nothing, then gives the first result", async () => {
    const { serial, envs, phone } = lab as ReplicaLab;
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], envs[0]);
    expect(acquired.json, acquired.stderr).toMatchObject({ ok: true });
    const lease = acquired.json["lease"] as { token: string };
    const on = (i: number) => ({ ...envs[i], FARM_LEASE: lease.token, FARM_DEVICE: serial });
    const before = new Set((await actions(envs[0])).map((a) => a.actionId));
    // The first call runs until the test lets it end (a property set on the simulated phone), not for a fixed time.
    const command = ["shell", "--request-id", "pending-1", "--", "until [ \"$(getprop farm.test.go)\" = 1 ]; do sleep 0.05; done; echo released-$$"];
    const firstCall = farm(command, on(0));
    await waitFor("the first call running on the phone", async () => (await actions(envs[0])).find((a) => !before.has(a.actionId) && a.state !== "settled"));
    const elsewhere = await farm(command, on(1));
    expect(elsewhere.json, elsewhere.stderr).toMatchObject({ ok: false, code: "IDEMPOTENCY_PENDING", field: "request-id", dispatched: null, ambiguous: true });
    expect(elsewhere.code).toBe(75);
    phone.setProp("farm.test.go", "1");
    const first = await firstCall;
    expect(first.json, first.stderr).toMatchObject({ ok: true, exitCode: 0, stdout: expect.stringMatching(/^released-\d+\n$/) });
    const retry = await farm(command, on(1));
    expect(retry.json, retry.stderr).toMatchObject({ ok: true, stdout: first.json["stdout"], actionId: first.json["actionId"] });
    const fresh = (await actions(envs[0])).filter((a) => !before.has(a.actionId));
    expect(fresh).toHaveLength(1);
    expect((await farm(["lease", "release"], on(1))).code).toBe(0);
  });
});
