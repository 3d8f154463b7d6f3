/**
 * A revoked person holds nothing, end to end: `farm standalone` as its own
 * process (coordinator and agent), a simulated phone behind a real adb
 * server, the user's own adb server for `farm adb connect`, the real CLI.
 */
import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdb, startAdbServer, type AdbServer } from "../devsim/index.js";
import { connectForeground } from "../support/adb-connect.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let user: AdbServer;
let serial = "";
const children: ChildProcess[] = [];

interface ActivityJson {
  caller: string;
  serial: string;
  command: string;
  leaseId: string;
  detail: string;
}

async function userEnv(name: string): Promise<NodeJS.ProcessEnv> {
  const r = await farm(["token", "create", "--kind", "user", "--name", name], lab.env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return { ...lab.env, FARM_TOKEN: String(r.json["token"]) };
}

async function queue(): Promise<{ holder: string }[]> {
  return ((await farm(["lease", "list"], lab.env)).json["queue"] ?? []) as { holder: string }[];
}

beforeAll(async () => {
  lab = await startLab("token-revocation");
  ({ serial } = await lab.addDevice({ serialno: "RREVOKE01" }));
  user = await startAdbServer();
}, 120_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  await user?.stop();
  await lab?.stop();
});

describe("farm token revoke", () => {
  it("ends what the revoked user held: the lease (the phone is free), its adb tunnel, its session, its queued wait; activity says who; the lease token is spent", async () => {
    const alice = await userEnv("alice");
    const bob = await userEnv("bob");
    const acquired = await farm(["lease", "acquire", "--device", serial], alice);
    expect(acquired.code, acquired.stdout + acquired.stderr).toBe(0);
    const lease = acquired.json["lease"] as { token: string; leaseId: string };
    const held = { ...alice, FARM_LEASE: lease.token, FARM_DEVICE: serial, ANDROID_ADB_SERVER_PORT: String(user.port) };

    // Another user holding alice's lease token may not renew or release her lease.
    for (const verb of ["renew", "release"]) {
      const r = await farm(["lease", verb, "--lease", lease.token], bob);
      expect(r.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER", field: "lease" });
      expect(String(r.json["message"])).toContain("alice");
    }

    // Her adb tunnel, her session, and a second wait of hers for the same phone.
    const tunnel = await connectForeground(held);
    children.push(tunnel.proc);
    expect(tunnel.answer).toMatchObject({ ok: true, device: serial });
    const local = String(tunnel.answer["serial"]);
    const inUserAdb = async () => (await runAdb(user.port, ["devices"])).stdout.split("\n").some((l) => l.startsWith(`${local}\t`));
    await waitFor("the tunnel in the user's adb", async () => ((await inUserAdb()) ? true : undefined));
    const started = await farm(["session", "start", "--device", serial, "--name", "before-revocation"], held);
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const sessionId = String((started.json["session"] as { sessionId: string }).sessionId);
    const secondWait = farm(["lease", "acquire", "--device", serial, "--wait", "5m"], alice);
    await waitFor("alice's wait in the queue", async () => ((await queue()).some((w) => w.holder === "alice") ? true : undefined));

    const revoked = await farm(["token", "revoke", "alice"], lab.env);
    expect(revoked.code, revoked.stdout + revoked.stderr).toBe(0);

    // The phone is free: bob leases it at once (no wait).
    const bobs = await farm(["lease", "acquire", "--device", serial], bob);
    expect(bobs.code, bobs.stdout + bobs.stderr).toBe(0);
    const bobLease = bobs.json["lease"] as { token: string };
    // Her tunnel is closed, and the agent let go of the phone: bob's own change goes through.
    expect(await tunnel.exited).toBe(77);
    await waitFor("the tunnel gone from the user's adb", async () => ((await inUserAdb()) ? undefined : true));
    const change = await waitFor("bob's shell on the phone", async () => {
      const r = await farm(["shell", "--", "echo", "bob"], { ...bob, FARM_LEASE: bobLease.token, FARM_DEVICE: serial });
      return r.json["code"] === "DEVICE_BUSY" ? undefined : r;
    });
    expect(change.json).toMatchObject({ ok: true });
    // Her session ended with the lease; her wait is gone, its call failed.
    const session = (await farm(["session", "show", sessionId], lab.env)).json["session"] as { status: string };
    expect(session.status).toBe("lease-ended");
    expect((await secondWait).code).not.toBe(0);
    expect((await queue()).map((w) => w.holder)).not.toContain("alice");

    // The activity log says who revoked, which lease on which phone.
    const activity = (await farm(["activity", "--device", serial], lab.env)).json["entries"] as ActivityJson[];
    const ended = activity.find((e) => e.command === "revokeToken" && e.leaseId === lease.leaseId);
    expect(ended).toMatchObject({ caller: "admin", serial });
    expect(ended?.detail).toMatch(/token "alice" revoked by admin: its lease ended/);
    expect(activity.filter((e) => e.command === "revokeToken")).toContainEqual(expect.objectContaining({ caller: "admin", detail: expect.stringContaining(`its wait for device ${serial} is dropped`) }));

    // Her lease token is spent, for bob as for anyone: no renewal, release or use.
    expect((await farm(["lease", "renew", "--lease", lease.token], bob)).json).toMatchObject({ ok: false, code: "LEASE_RELEASED" });
    expect((await farm(["lease", "release", "--lease", lease.token], lab.env)).json).toMatchObject({ ok: false, code: "LEASE_RELEASED" });
    expect((await farm(["shell", "--", "echo", "x"], { ...bob, FARM_LEASE: lease.token, FARM_DEVICE: serial })).json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    expect((await farm(["lease", "release"], { ...bob, FARM_LEASE: bobLease.token })).code).toBe(0);
  });
});
