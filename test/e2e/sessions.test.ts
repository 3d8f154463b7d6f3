/**
 * Recorded sessions end to end: `farm standalone` as its own process, a real
 * adb server, simulated phones, and the real CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm, farmProcess } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let serials: string[] = [];

interface SessionJson {
  sessionId: string;
  name: string;
  status: string;
  owner: string;
  serial: string;
  physicalId: string;
  leaseId: string;
  endedAt: string | null;
  context: Record<string, unknown>;
  ocr: boolean;
}

async function acquire(serial: string, env = lab.env) {
  const r = await farm(["lease", "acquire", "--device", serial], env);
  expect(r.code, r.stderr).toBe(0);
  return r.json["lease"] as { token: string; leaseId: string; physicalId: string };
}

async function show(id: string): Promise<SessionJson> {
  const r = await farm(["session", "show", id], lab.env);
  expect(r.code, r.stderr).toBe(0);
  return r.json["session"] as SessionJson;
}

beforeAll(async () => {
  lab = await startLab("sessions");
  serials = [];
  for (let i = 0; i < 3; i++) serials.push((await lab.addDevice({ serialno: `SESS${String(i).padStart(4, "0")}` })).serial);
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("sessions", () => {
  it("needs the caller's lease on the phone to start", async () => {
    const serial = serials[0] as string;
    const none = await farm(["session", "start", "--device", serial], lab.env);
    expect(none.code).not.toBe(0);
    expect(none.json).toMatchObject({ ok: false, code: "LEASE_REQUIRED" });
    const missing = await farm(["session", "end", "--session", "no-such-session"], lab.env);
    expect(missing.json).toMatchObject({ ok: false, code: "SESSION_NOT_FOUND", field: "session" });
  });

  it("starts, lists, shows and ends with its owner; another user may not end it; it ends once", async () => {
    const serial = serials[0] as string;
    const lease = await acquire(serial);
    const env = { ...lab.env, FARM_LEASE: lease.token };
    const started = await farm(["session", "start", "--device", serial, "--name", "checkout", "--ocr", "--context-json", "{\"build\":\"1.2.3\"}"], env);
    expect(started.code, started.stderr).toBe(0);
    const s = started.json["session"] as SessionJson;
    expect(s).toMatchObject({ name: "checkout", status: "running", owner: "admin", serial, physicalId: lease.physicalId, leaseId: lease.leaseId, context: { build: "1.2.3" }, ocr: true, endedAt: null });

    // Pretty output prints the id and the export line.
    const pretty = await farm(["session", "start", "--device", serial], { ...env, FARM_OUTPUT: "pretty" });
    expect(pretty.code, pretty.stderr).toBe(0);
    const [id2, exportLine] = pretty.stdout.trim().split("\n");
    expect(exportLine).toBe(`export FARM_SESSION=${id2}`);

    const listed = await farm(["session", "list", "--device", serial, "--status", "running"], lab.env);
    const ids = (listed.json["sessions"] as SessionJson[]).map((x) => x.sessionId);
    // Newest first.
    expect(ids).toEqual([id2, s.sessionId]);
    expect((await show(s.sessionId)).status).toBe("running");

    const other = await farm(["token", "create", "--kind", "user", "--name", "sess-bot"], lab.env);
    const botEnv = { ...lab.env, FARM_TOKEN: String(other.json["token"]) };
    const denied = await farm(["session", "end", "--session", s.sessionId], botEnv);
    expect(denied.json).toMatchObject({ ok: false, code: "PERMISSION_DENIED", field: "session" });
    expect((await show(s.sessionId)).status).toBe("running");

    // The session id comes from FARM_SESSION when --session is not given.
    const ended = await farm(["session", "end", "--status", "failed"], { ...lab.env, FARM_SESSION: s.sessionId });
    expect(ended.code, ended.stderr).toBe(0);
    expect(ended.json["session"]).toMatchObject({ sessionId: s.sessionId, status: "failed" });
    const again = await farm(["session", "end", "--session", s.sessionId], lab.env);
    expect(again.json).toMatchObject({ ok: false, code: "SESSION_ENDED" });

    const mine = (await farm(["session", "list", "--user", "admin", "--status", "failed"], lab.env)).json["sessions"] as SessionJson[];
    expect(mine.map((x) => x.sessionId)).toContain(s.sessionId);
    expect((await farm(["session", "list", "--user", "sess-bot"], lab.env)).json["sessions"]).toEqual([]);

    // Releasing the lease ends what still runs under it.
    const released = await farm(["lease", "release"], env);
    expect(released.code, released.stderr).toBe(0);
    const after = await show(id2 as string);
    expect(after.status).toBe("lease-ended");
    expect(after.endedAt).not.toBeNull();
    expect((await show(s.sessionId)).status).toBe("failed");
    const late = await farm(["session", "end", "--session", id2 as string], lab.env);
    expect(late.json).toMatchObject({ ok: false, code: "SESSION_ENDED" });
  });

  it("refuses a session on someone else's lease", async () => {
    const serial = serials[2] as string;
    const other = await farm(["token", "create", "--kind", "user", "--name", "sess-holder"], lab.env);
    const holderEnv = { ...lab.env, FARM_TOKEN: String(other.json["token"]) };
    const lease = await acquire(serial, holderEnv);
    const r = await farm(["session", "start", "--device", serial], lab.env);
    expect(r.json).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER" });
    await farm(["lease", "release"], { ...holderEnv, FARM_LEASE: lease.token });
  });

  it("farm lease run --session records a failed session for a failing command and a passed one for exit 0", async () => {
    const serial = serials[1] as string;
    const failed = await farmProcess(["lease", "run", "--device", serial, "--session", "--session-name", "ci-run", "--", "sh", "-c", "echo $FARM_SESSION; exit 3"], lab.env);
    expect(failed.code, failed.stderr).toBe(3);
    // The command's line first; then, with JSON output, lease run's summary naming the same session.
    const [failedId = "", failedSummary = "{}"] = failed.stdout.trim().split("\n");
    expect(failedId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await show(failedId)).toMatchObject({ status: "failed", name: "ci-run", serial });
    expect(JSON.parse(failedSummary)).toMatchObject({ sessionId: failedId, sessionStatus: "failed", exitCode: 3 });

    const passed = await farmProcess(["lease", "run", "--device", serial, "--session", "--", "sh", "-c", "echo $FARM_SESSION"], lab.env);
    expect(passed.code, passed.stderr).toBe(0);
    const passedId = passed.stdout.trim().split("\n")[0] ?? "";
    expect(passedId).not.toBe(failedId);
    expect((await show(passedId)).status).toBe("passed");

    // Without --session the command sees no session.
    const plain = await farmProcess(["lease", "run", "--device", serial, "--", "sh", "-c", "echo \"[$FARM_SESSION]\""], { ...lab.env, FARM_SESSION: "" });
    expect(plain.stdout.trim().split("\n")[0]).toBe("[]");
  });
});
