/**
 * A leased phone's reads are its holder's, end to end: `farm standalone`
 * (coordinator and agent), a private adb server, simulated phones and the
 * CLI. Operator bob is refused alice's phone's screenshot, UI tree, logcat,
 * properties, evidence and video, before any adb service is opened on it
 * and before an output directory is made; alice and an admin read it, and
 * bob reads a free phone.
 */
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimDevice } from "../devsim/index.js";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let leased: { device: SimDevice; serial: string };
let free: { device: SimDevice; serial: string };
let alice: NodeJS.ProcessEnv;
let bob: NodeJS.ProcessEnv;
let aliceLease: string;
/** adb services opened on the leased phone (its OPEN packets), in order. */
const opened: string[] = [];

/** The phone's own reads: what screenshot, tree, logcat and video open on it. */
const PHONE_READS = /screencap|uiautomator|logcat|screenrecord/;

const exists = (path: string) => stat(path).then(() => true, () => false);

async function user(name: string): Promise<NodeJS.ProcessEnv> {
  const r = await farm(["token", "create", "--kind", "user", "--name", name], lab.env);
  expect(r.code, r.stdout).toBe(0);
  return { ...lab.env, FARM_TOKEN: String(r.json["token"]) };
}

/** Each read of a phone as the CLI does it; the screenshot and bundle go to `${out}.png` and `${out}-bundle`. */
const reads = (serial: string, out: string): Record<string, string[]> => ({
  "take its screenshot": ["screenshot", "--device", serial, `${out}.png`],
  "read its UI tree": ["ui", "tree", "--device", serial],
  "read its logcat": ["device", "logcat", "--device", serial, "--lines", "5"],
  "read its properties": ["device", "props", "--device", serial],
  "capture evidence of it": ["evidence", "capture", "--device", serial, `${out}-bundle`],
  "start a recording of it": ["evidence", "video", "start", "--device", serial, "--duration-seconds", "2", "--size", "216x480", `${out}-video`],
});

beforeAll(async () => {
  lab = await startLab("holder-reads");
  leased = await lab.addDevice({ serialno: "HOLDER0001", trace: (line) => void (line.startsWith("<- OPEN") && opened.push(line)) });
  free = await lab.addDevice({ serialno: "HOLDER0002" });
  alice = await user("alice");
  bob = await user("bob");
  const r = await farm(["lease", "acquire", "--device", leased.serial, "--ttl", "10m"], alice);
  expect(r.code, r.stdout).toBe(0);
  aliceLease = String((r.json["lease"] as { token: string }).token);
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("a leased phone's reads", () => {
  it("are refused to another operator, naming the holder, before any adb service or output dir", async () => {
    const out = join(lab.dir.path, "bob");
    const before = opened.length;
    for (const [what, args] of Object.entries(reads(leased.serial, out))) {
      const r = await farm(args, bob);
      expect(r.code, `${what}: ${r.stdout}`).not.toBe(0);
      expect(r.json, what).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER", dispatched: false, ambiguous: false });
      expect(String(r.json["message"]), what).toMatch(new RegExp(`is leased by alice until \\S+; only the holder or an admin may ${what}$`));
    }
    expect(opened.slice(before).filter((o) => PHONE_READS.test(o))).toEqual([]);
    expect(await exists(`${out}.png`)).toBe(false);
    expect(await exists(`${out}-bundle`)).toBe(false);
    expect(await exists(`${out}-video`)).toBe(false);
  });

  it("are the holder's and an admin's", async () => {
    const out = join(lab.dir.path, "alice");
    const ticker = setInterval(() => leased.device.state.screen.changed(), 50);
    try {
      for (const [what, args] of Object.entries(reads(leased.serial, out))) {
        const framesBefore = leased.device.state.recordedFrames.value;
        const r = await farm(args, alice);
        expect(r.code, `${what}: ${r.stdout}`).toBe(0);
        if (what === "start a recording of it") {
          // A recording stopped before its second frame has no timeline (VIDEO_EMPTY): wait until the encoder has taken three.
          await leased.device.state.recordedFrames.reached(framesBefore + 3);
          const stopped = await farm(["evidence", "video", "stop", "--session", String(r.json["sessionId"])], alice);
          expect(stopped.code, stopped.stdout).toBe(0);
        }
      }
    } finally {
      clearInterval(ticker);
    }
    expect((await readFile(`${out}.png`)).subarray(1, 4).toString()).toBe("PNG");
    expect(await exists(join(`${out}-bundle`, "manifest.json"))).toBe(true);
    expect(opened.some((o) => o.includes("screencap"))).toBe(true);
    const byAdmin = await farm(["screenshot", "--device", leased.serial, join(lab.dir.path, "admin.png")], lab.env);
    expect(byAdmin.code, byAdmin.stdout).toBe(0);
  });

  it("are open to whoever presents the holder's lease token (--lease, FARM_LEASE)", async () => {
    const shared = { ...bob, FARM_LEASE: aliceLease };
    const shot = await farm(["screenshot", "--device", leased.serial, join(lab.dir.path, "shared.png")], shared);
    expect(shot.code, shot.stdout).toBe(0);
    const capture = await farm(["evidence", "capture", "--device", leased.serial, "--lease", aliceLease], bob);
    expect(capture.code, capture.stdout).toBe(0);
  });

  it("of a free phone are any operator's", async () => {
    const r = await farm(["screenshot", "--device", free.serial, join(lab.dir.path, "free.png")], bob);
    expect(r.code, r.stdout).toBe(0);
    const props = await farm(["device", "props", "--device", free.serial], bob);
    expect(props.code, props.stdout).toBe(0);
  });
});
