/**
 * The agent's adb server dies: its phones must not keep looking usable.
 * `farm standalone --no-adb-start` against a private adb server and a
 * simulated phone; the server is killed, the phones turn `unavailable`
 * (listed, not leasable), and come back when an adb server runs again on
 * the same port and the phone reconnects.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exitCodeFor } from "@farm/shared/error-codes";
import { adbConnect, startAdbServer, type AdbServer } from "../devsim/index.js";
import { hostRequest } from "../devsim/host/host-client.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

/** The lab's heartbeat (--heartbeat-interval 500). */
const HEARTBEAT_MS = 500;

let lab: Lab;
let serial: string;
let restarted: AdbServer | undefined;

const answers = (port: number) => hostRequest(port, "host:version").then(() => true, () => false);

async function stateOf(s: string): Promise<string | undefined> {
  const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string }[];
  return list.find((d) => d.serial === s)?.state;
}

beforeAll(async () => {
  lab = await startLab("adb-server-down");
  ({ serial } = await lab.addDevice({ serialno: "ADBDOWN01" }));
});

afterAll(async () => {
  await restarted?.stop();
  await lab?.stop();
});

describe("a dead adb server", () => {
  it("turns the agent's phones unavailable within a heartbeat, unleasable, and back to device when adb returns", async () => {
    const port = lab.adb.port;
    expect(await stateOf(serial)).toBe("device");

    process.kill(lab.adb.pid, "SIGKILL");
    const killedAt = Date.now();
    await waitFor("the adb server gone", async () => ((await answers(port)) ? undefined : true));
    // The agent sends the change when it sees it; the CLI call adds its own start-up time.
    const seen = await waitFor("the phone unavailable", async () => ((await stateOf(serial)) === "unavailable" ? Date.now() : undefined), { timeoutMs: 10_000, intervalMs: 50 });
    expect(seen - killedAt).toBeLessThan(HEARTBEAT_MS + 2_500);

    // Listed, but not granted to anyone.
    const lease = await farm(["lease", "acquire", "--device", serial, "--wait", "1s"], lab.env);
    expect(lease.json["ok"]).toBe(false);
    // Not granted: the farm's own failure (no device, or the wait ran out), never a test's 1.
    expect(lease.code, lease.stdout).toBe(exitCodeFor(String(lease.json["code"])));
    expect([69, 75]).toContain(lease.code);
    expect(lease.json["lease"]).toBeUndefined();
    // --no-adb-start: the agent did not start a server of its own meanwhile.
    expect(await answers(port)).toBe(false);
    expect(await stateOf(serial)).toBe("unavailable");

    restarted = await startAdbServer({ port });
    const [host, devicePort] = serial.split(":") as [string, string];
    await adbConnect(port, host, Number(devicePort));
    // Back, and its identity read again: a lease by serial needs the physical id (DEVICE_IDENTITY_PENDING until then).
    await waitFor("the phone back with its identity", async () => {
      const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties?: { physicalId?: string } }[];
      const d = list.find((e) => e.serial === serial);
      return d?.state === "device" && d.properties?.physicalId ? true : undefined;
    }, { timeoutMs: 20_000 });
    const again = await farm(["lease", "acquire", "--device", serial, "--wait", "5s"], lab.env);
    expect(again.code, again.stdout).toBe(0);
    expect((await farm(["lease", "release", "--lease", (again.json["lease"] as { token: string }).token], lab.env)).code).toBe(0);
  });
});
