/**
 * `--request-id` across a coordinator restart (SQLite, the same data dir):
 * the first call's answer is in the database, so a retry after the restart
 * gets it instead of running the command again on the phone.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { deviceListed } from "../support/device-listed.js";
import { farm, startFarm, type FarmProcess } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

let lab: SplitFarm;
let restarted: FarmProcess | undefined;
let phone: SimDevice | undefined;

beforeAll(async () => {
  lab = await startSplitFarm("request-id-restart");
});

afterAll(async () => {
  await restarted?.stop();
  await phone?.close();
  await lab?.stop();
});

describe("request ids across a coordinator restart", () => {
  it("answers a retry after the restart with the first result, with the phone back online", async () => {
    phone = new SimDevice();
    const serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
    const token = String(lab.env["FARM_TOKEN"]);
    await deviceListed(lab.url, token, serial);
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "10m"], lab.env);
    expect(acquired.json, acquired.stderr).toMatchObject({ ok: true });
    const env = { ...lab.env, FARM_LEASE: (acquired.json["lease"] as { token: string }).token, FARM_DEVICE: serial };
    // $$ (a new shell's pid): a command run twice would answer differently, not only under another action id.
    const command = ["shell", "--request-id", "restart-1", "--", "echo", "once-$$"];
    const first = await farm(command, env);
    expect(first.json, first.stderr).toMatchObject({ ok: true, exitCode: 0 });

    // The coordinator restarted on the same address and data dir; the agent attached again, the phone online.
    await lab.agent.stop();
    const port = new URL(lab.url).port;
    await lab.coordinator.stop();
    restarted = await startFarm(["coordinator", "--listen", `127.0.0.1:${port}`, "--data-dir", join(lab.dir.path, "coordinator")]);
    await lab.restartAgent();
    await deviceListed(lab.url, token, serial);

    const retry = await farm(command, env);
    expect(retry.json, retry.stderr).toMatchObject({ ok: true, stdout: first.json["stdout"], actionId: first.json["actionId"] });
    const activity = await farm(["activity", "--device", serial], lab.env);
    const entries = activity.json["entries"] as { command: string; outcome: string }[];
    expect(entries.filter((e) => e.command === "runShell" && e.outcome === "ok")).toHaveLength(1);
  }, 120_000);
});
