/**
 * The summary key across coordinator replicas on one PostgreSQL database,
 * each with a data dir of its own: a viewer sees the same keyed hash of a
 * secret through either replica (the key is in the database, not in a data
 * dir), and after an admin rotates it through one replica, the other shows
 * the new key's hash too.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm, waitFor } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";

const SECRET = "rotation-s3cr3t-91c2";

let lab: ReplicaLab;

beforeAll(async () => {
  lab = await startReplicaLab("replica-summary-key", { serialno: "RKEY01" });
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("the summary key on replicas", () => {
  it("is one key for every replica, in the database, and a rotation through one reaches the other", async () => {
    const [env0, env1] = lab.envs as [NodeJS.ProcessEnv, NodeJS.ProcessEnv];
    const viewer = await farm(["token", "create", "--kind", "user", "--name", "key-viewer", "--role", "viewer"], env0);
    expect(viewer.code).toBe(0);
    const asViewer = (env: NodeJS.ProcessEnv) => ({ ...env, FARM_TOKEN: String(viewer.json["token"]) });

    const lease = await farm(["lease", "acquire", "--device", lab.serial, "--ttl", "5m", "--wait", "20s"], env0);
    expect(lease.code).toBe(0);
    const leaseToken = String((lease.json["lease"] as { token: string }).token);
    expect((await farm(["shell", "--device", lab.serial, "--", "echo", SECRET], { ...env0, FARM_LEASE: leaseToken })).json).toMatchObject({ ok: true });

    type Entry = { id: string; command: string; detail: string };
    const entries = async (env: NodeJS.ProcessEnv) => (await farm(["activity", "--device", lab.serial], env)).json["entries"] as Entry[];
    const id = (await entries(env0)).find((e) => e.detail === `echo ${SECRET}`)?.id;
    expect(id).toBeDefined();
    const seenThrough = async (env: NodeJS.ProcessEnv) => (await entries(asViewer(env))).find((e) => e.id === id)?.detail ?? "";

    const before = await seenThrough(env0);
    expect(before).toMatch(/^echo \[hmac:[0-9a-f]{64}\]$/);
    expect(await seenThrough(env1)).toBe(before);
    // Nothing shared but the database: no replica's data dir holds a key file.
    for (let i = 0; i < lab.replicas.length; i++) expect(existsSync(join(lab.dir.path, `coordinator-${i}`, "summary.key"))).toBe(false);

    expect((await farm(["privacy", "rotate-key"], env0)).json).toMatchObject({ ok: true });
    const after = await seenThrough(env0);
    expect(after).toMatch(/^echo \[hmac:[0-9a-f]{64}\]$/);
    expect(after).not.toBe(before);
    await waitFor("replica 1 showing the new key's hash", async () => ((await seenThrough(env1)) === after ? true : undefined));
    await farm(["lease", "release", "--lease", leaseToken], env0);
  });
});
