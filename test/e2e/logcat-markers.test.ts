/**
 * farm's own step markers (the `farmstep` lines the agent logs with
 * Android's `log` tool to bound a step's device log) stay out of what
 * `farm logcat` shows the user: a session step with a device log writes
 * them into the phone's log, and the user's own line is still there.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let serial: string;

beforeAll(async () => {
  lab = await startLab("logcat-markers");
  ({ serial } = await lab.addDevice({ serialno: "LOGMARK01" }));
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("farm logcat and farm's step markers", () => {
  it("shows the user's line and not the markers a session step wrote around it", async () => {
    const lease = await farm(["lease", "acquire", "--device", serial], lab.env);
    expect(lease.code, lease.stderr).toBe(0);
    const token = (lease.json["lease"] as { token: string }).token;
    const policy = join(lab.dir.path, "policy.json");
    await writeFile(policy, JSON.stringify({ capture: ["deviceLog"] }));
    const started = await farm(["session", "start", "--device", serial, "--policy", policy], { ...lab.env, FARM_LEASE: token });
    expect(started.code, started.stderr).toBe(0);
    const sessionId = (started.json["session"] as { sessionId: string }).sessionId;
    const env = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial, FARM_SESSION: sessionId };

    const step = await farm(["shell", "--", "log", "-t", "MyApp", "-p", "i", "checkout button pressed"], env);
    expect(step.code, step.stdout + step.stderr).toBe(0);
    // The step kept its device log: the agent wrote its begin and end markers into the phone's log.
    const shown = await farm(["session", "show", sessionId, "--output", "json"], lab.env);
    expect(JSON.stringify(shown.json)).toMatch(/deviceLog/);

    const log = await farm(["logcat", "--lines", "200"], env);
    expect(log.code, log.stderr).toBe(0);
    const text = String(log.json["text"]);
    expect(text).toContain("checkout button pressed");
    expect(text).not.toMatch(/farmstep/);
  });
});
