/**
 * A test session whose owner is over their evidence quota, end to end:
 * `farm coordinator --evidence-quota 1` and `farm agent` as separate
 * processes, a simulated phone, the CLI. Its steps are recorded with their
 * results; the screenshots that do not fit are disclosed, not kept.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

let lab: SplitFarm;
const phones: SimDevice[] = [];

beforeAll(async () => {
  lab = await startSplitFarm("session-quota", { coordinatorArgs: ["--evidence-quota", "1"] });
});

afterAll(async () => {
  await lab?.stop();
  for (const p of phones) await p.close();
});

interface Image {
  sha256?: string;
  errorCode?: string;
  errorMessage?: string;
}

describe("a session step over its owner's evidence quota", () => {
  it("is recorded with its result, its screenshots skipped QUOTA_EXCEEDED", async () => {
    const device = new SimDevice({ serialno: "SQUOTA0001" });
    phones.push(device);
    const serial = await adbConnect(lab.adb.port, "127.0.0.1", await device.listen());
    await waitFor(`${serial} in farm devices`, async () => {
      const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
      return list.some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId) || undefined;
    });
    const l = await farm(["lease", "acquire", "--device", serial], lab.env);
    expect(l.code, l.stderr).toBe(0);
    const lease = (l.json["lease"] as { token: string }).token;
    const s = await farm(["session", "start", "--device", serial], { ...lab.env, FARM_LEASE: lease });
    expect(s.code, s.stderr).toBe(0);
    const id = (s.json["session"] as { sessionId: string }).sessionId;
    const env = { ...lab.env, FARM_LEASE: lease, FARM_SESSION: id, FARM_DEVICE: serial };

    const sh = await farm(["shell", "--", "echo", "over-quota"], env);
    expect(sh.json).toMatchObject({ ok: true, exitCode: 0 });

    const shown = await farm(["session", "show", id], lab.env);
    expect(shown.json["session"]).toMatchObject({ stepCount: 1, failedStepCount: 0 });
    const [step] = shown.json["steps"] as { action: string; result: { ok: boolean; exitCode?: number }; before?: Image; after?: Image }[];
    expect(step).toMatchObject({ action: "shell", result: { ok: true, exitCode: 0 } });
    for (const shot of [step?.before, step?.after]) {
      expect(shot?.sha256 ?? "").toBe("");
      expect(shot).toMatchObject({ errorCode: "QUOTA_EXCEEDED" });
      expect(shot?.errorMessage).toContain("--evidence-quota");
    }
  });
});
