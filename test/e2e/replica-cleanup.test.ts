/**
 * Phones cleaned between users across coordinator replicas: two `farm
 * coordinator --cleanup FILE` processes on one PostgreSQL database, the
 * phone's agent on replica A. A phone marked needs-attention through A is
 * not granted through B (not even to a caller queued on B before its lease
 * ended), and an admin's clear-attention through B frees it on A.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { buildSimApk } from "../devsim/index.js";
import { farm, farmProcess, waitFor } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let lab: ReplicaLab;
let files: TempDir;
const A = 0;
const B = 1;

interface Listed {
  serial: string;
  state: string;
  attentionReason?: string;
}

async function listed(i: number): Promise<Listed | undefined> {
  return ((await farm(["devices"], lab.envs[i])).json["devices"] as Listed[] | undefined)?.find((d) => d.serial === lab.serial);
}

/** Waits until replica i lists the phone in this state. */
function stateOn(i: number, state: string): Promise<Listed> {
  return waitFor(`${lab.serial} ${state} on replica ${i}`, async () => {
    const d = await listed(i);
    return d?.state === state ? d : undefined;
  }, { timeoutMs: 60_000 });
}

beforeAll(async () => {
  files = await makeTempDir("replica-cleanup");
  const policy = join(files.path, "cleanup.yaml");
  await writeFile(policy, "version: 1\ntimeoutSeconds: 60\n");
  lab = await startReplicaLab("replica-cleanup", { replicas: 2, coordinatorArgs: ["--cleanup", policy] });
}, 180_000);

afterAll(async () => {
  await lab?.stop();
  await files?.remove();
});

describe("cleanup across replicas", () => {
  it("a phone marked needs-attention through A is not granted through B, even to a caller queued on B before; clear-attention through B frees it on A", async () => {
    lab.phone.faults.set({ uninstallRefused: ["com.example.stuck"] });
    const held = await farm(["lease", "acquire", "--device", lab.serial, "--ttl", "5m"], lab.envs[A]);
    expect(held.json).toMatchObject({ ok: true });
    const token = String((held.json["lease"] as { token: string }).token);
    const apk = join(files.path, "stuck.apk");
    await writeFile(apk, buildSimApk({ name: "com.example.stuck" }));
    expect((await farm(["install", apk], { ...lab.envs[A], FARM_LEASE: token, FARM_DEVICE: lab.serial })).json).toMatchObject({ ok: true });

    // A caller waits for the phone on B.
    let settled = false;
    const waiting = farmProcess(["lease", "acquire", "--device", lab.serial, "--wait", "10m", "--ttl", "2m"], lab.envs[B]).finally(() => (settled = true));
    onTestFinished(async () => {
      // Its grant, if any, goes back (the wait itself ends with the lab).
      const r = await waiting.catch(() => undefined);
      const t = (r?.json["lease"] as { token?: string } | undefined)?.token;
      if (t) await farm(["lease", "release", "--lease", t], lab.envs[B]);
    });
    await waitFor("the caller queued on B", async () => (((await farm(["lease", "list"], lab.envs[B])).json["queue"] as unknown[] | undefined)?.length === 1 ? true : undefined), { timeoutMs: 30_000 });

    // The lease ends through A; its cleanup fails there (the app cannot be uninstalled).
    expect((await farm(["lease", "release", "--lease", token], lab.envs[A])).json).toMatchObject({ ok: true });
    const onA = await stateOn(A, "needs-attention");
    expect(onA.attentionReason).toMatch(/uninstall com\.example\.stuck failed/);
    // B shows it too, with the reason, and refuses it by serial.
    expect((await stateOn(B, "needs-attention")).attentionReason).toBe(onA.attentionReason);
    expect((await farm(["lease", "acquire", "--device", lab.serial, "--wait", "0"], lab.envs[B])).json).toMatchObject({ ok: false, code: "DEVICE_NEEDS_ATTENTION" });
    // The caller queued on B before got nothing: still queued, and no lease on the phone anywhere.
    expect(settled).toBe(false);
    const list = await farm(["lease", "list"], lab.envs[A]);
    expect(list.json["leases"]).toEqual([]);
    expect(list.json["queue"]).toHaveLength(1);

    // An admin clears it through B, once the app can go: A lists it free, and B's waiter gets it.
    lab.phone.faults.set({ uninstallRefused: null });
    expect((await farm(["device", "clear-attention", "--device", lab.serial], lab.envs[B])).json).toMatchObject({ ok: true, reason: onA.attentionReason });
    const granted = await waiting;
    expect(granted.json).toMatchObject({ ok: true, lease: { serial: lab.serial } });
    const grantedToken = String((granted.json["lease"] as { token: string }).token);
    expect((await farm(["lease", "release", "--lease", grantedToken], lab.envs[B])).json).toMatchObject({ ok: true });
    // That lease's cleanup (on B, which granted it) uninstalls what the first left, and the phone is leasable through A.
    await stateOn(A, "device");
    const again = await farm(["lease", "acquire", "--device", lab.serial, "--wait", "30s", "--ttl", "1m"], lab.envs[A]);
    expect(again.json).toMatchObject({ ok: true });
    expect((await farm(["lease", "release", "--lease", String((again.json["lease"] as { token: string }).token)], lab.envs[A])).json).toMatchObject({ ok: true });
  });
});
