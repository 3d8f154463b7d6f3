/**
 * The coordinator's registry across a restart, with coordinator and agent as
 * separate processes: while the agent is away, `farm devices` lists every
 * device with every property it had (physical id, identity status, pin
 * label, platform), so an offline iPhone is still an iPhone.
 */
import { mkdirSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

const IOS_ID = "7B2E4F3C-1D6E-4F80-AB9C-2D3E4F5A6B7C";
// The compiled stand-in (vitest runs this file from source, test/e2e/).
const devicectl = `${process.execPath} ${fileURLToPath(new URL("../dist/fakes/devicectl.js", import.meta.url))}`;

interface ListedDevice {
  serial: string;
  state: string;
  agentName: string;
  properties: Record<string, unknown> & { physicalId: string; identityStatus: string; platform: string; pinLabel: string };
}

let lab: SplitFarm;
let coordinator: FarmProcess | undefined;
const phones: SimDevice[] = [];

const devices = async (): Promise<ListedDevice[]> => ((await farm(["devices"], lab.env)).json["devices"] ?? []) as ListedDevice[];

beforeAll(async () => {
  lab = await startSplitFarm("registry-restart", {
    agentArgs: ["--devicectl", devicectl],
    agentEnv: (d) => ({ FARM_FAKE_DEVICECTL_STATE: join(d.path, "devicectl.json") }),
    beforeAgent: async (d) => {
      mkdirSync(join(d.path, "containers"), { recursive: true });
      await writeFile(
        join(d.path, "devicectl.json"),
        JSON.stringify({
          devices: [
            {
              identifier: IOS_ID,
              udid: "00008110-00AA11BB22CC33DD",
              name: "Restart iPhone",
              marketingName: "iPhone 15",
              osVersion: "17.2",
              paired: true,
              tunnelState: "connected",
              tunnelIPAddress: "127.0.0.1",
              developerMode: true,
              ddi: true,
              containers: {},
            },
          ],
        }),
      );
    },
  });
  coordinator = lab.coordinator;
});

afterAll(async () => {
  await coordinator?.stop();
  for (const p of phones) await p.close();
  await lab?.stop();
});

describe("the registry across a coordinator restart", () => {
  it("lists every device with every property it had while the agent is offline", async () => {
    // Two phones presenting one identity (the "0000" case), one of them pinned apart.
    const serials: string[] = [];
    for (let i = 0; i < 2; i++) {
      const phone = new SimDevice({ serialno: "0000" });
      phones.push(phone);
      serials.push(await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen()));
    }
    await waitFor("the duplicates and the iPhone", async () => {
      const list = await devices();
      return list.filter((d) => serials.includes(d.serial) && d.properties.identityStatus === "duplicate").length === 2 && list.some((d) => d.serial === IOS_ID && d.state === "device") ? true : undefined;
    });
    const pinned = await farm(["device", "pin", "--device", serials[0]!, "--label", "left-bench"], lab.env);
    expect(pinned.code).toBe(0);
    const before = await waitFor("the pin reported", async () => {
      const list = await devices();
      return list.find((d) => d.serial === serials[0])?.properties.pinLabel === "left-bench" ? list : undefined;
    });
    const iphone = before.find((d) => d.serial === IOS_ID);
    expect(iphone?.properties).toMatchObject({ platform: "ios", physicalId: expect.stringMatching(/^ios-/) });
    expect(before.find((d) => d.serial === serials[1])?.properties.identityStatus).not.toBe("");

    // Agent away, coordinator restarted on the same address and data dir.
    await lab.agent.stop();
    const port = new URL(lab.url).port;
    await lab.coordinator.stop();
    coordinator = await startFarm(["coordinator", "--listen", `127.0.0.1:${port}`, "--data-dir", join(lab.dir.path, "coordinator")]);

    const after = await devices();
    expect(after.map((d) => d.serial).sort()).toEqual(before.map((d) => d.serial).sort());
    for (const b of before) {
      const a = after.find((d) => d.serial === b.serial);
      expect(a?.state, b.serial).toBe("agent-offline");
      expect(a?.agentName, b.serial).toBe(b.agentName);
      expect(a?.properties, b.serial).toEqual(b.properties);
    }
    expect(after.find((d) => d.serial === IOS_ID)?.properties.platform).toBe("ios");
  });
});
