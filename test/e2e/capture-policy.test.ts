/**
 * Capture policies on recorded sessions, end to end (`farm standalone`, a
 * real adb server, simulated phones, the real CLI): which rules fire on
 * which steps, the device log's window around an action, what happens when
 * the phone goes mid-interval, kinds that cannot be supplied, and secrets
 * that must never reach any stored byte.
 */
import { execFileSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;

interface Artifact {
  name: string;
  kind: string;
  provider: string;
  sha256?: string;
  when?: string;
  reason?: string;
  speculative?: boolean;
  skippedReason?: string;
  warning?: string;
}
interface Step {
  sequence: number;
  action: string;
  result: { ok?: boolean; errorCode?: string };
  artifacts?: Artifact[];
}

async function steps(id: string): Promise<Step[]> {
  const r = await farm(["session", "show", id], lab.env);
  expect(r.code, r.stderr).toBe(0);
  return r.json["steps"] as Step[];
}

/** A lease and a session with this policy file: the environment the CLI records steps with. */
async function session(serial: string, policy: object | undefined, extraArgs: string[] = [], extraEnv: NodeJS.ProcessEnv = {}) {
  const l = await farm(["lease", "acquire", "--device", serial], lab.env);
  expect(l.code, l.stderr).toBe(0);
  const token = (l.json["lease"] as { token: string }).token;
  const args = ["session", "start", "--device", serial, ...extraArgs];
  if (policy) {
    const file = join(lab.dir.path, `policy-${serial.replace(/\W/g, "")}.json`);
    await writeFile(file, JSON.stringify(policy));
    args.push("--policy", file);
  }
  const s = await farm(args, { ...lab.env, ...extraEnv, FARM_LEASE: token });
  expect(s.code, s.stdout + s.stderr).toBe(0);
  const id = (s.json["session"] as { sessionId: string }).sessionId;
  return { id, env: { ...lab.env, FARM_LEASE: token, FARM_SESSION: id, FARM_DEVICE: serial } };
}

/** Reads a stored session file (a log, a tree) through the export. */
async function exported(id: string): Promise<Map<string, string>> {
  const dir = join(lab.dir.path, `export-${id}`);
  const r = await farm(["session", "export", id, dir], lab.env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  const files = new Map<string, string>();
  for (const f of execFileSync("find", [dir, "-type", "f"], { encoding: "utf8" }).trim().split("\n")) files.set(f.slice(dir.length + 1), execFileSync("cat", [f], { encoding: "latin1" }));
  return files;
}

const names = (s: Step | undefined) => (s?.artifacts ?? []).filter((a) => !a.skippedReason && !a.warning).map((a) => a.name).sort();

beforeAll(async () => {
  lab = await startLab("capture-policy");
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("capture policies", () => {
  it("fires each trigger exactly where it should: an action with an id glob, a screen change, an error; the default on every step", async () => {
    const { serial } = await lab.addDevice({ serialno: "CPOL0001" });
    const policy = {
      capture: ["elements.before"],
      capturePolicy: [
        { on: { action: "tap", idMatches: "*:id/about" }, capture: ["deviceLog"] },
        { on: { event: "screenChanged" }, capture: ["elements.after"] },
        { on: { result: "error" }, capture: ["deviceLog"] },
      ],
    };
    const { id, env } = await session(serial, policy);
    expect((await farm(["input", "tap", "--text", "Settings"], env)).code).toBe(0); // 1: screen changes
    expect((await farm(["input", "tap", "--id", "com.android.settings:id/about"], env)).code).toBe(0); // 2: id rule, screen changes
    expect((await farm(["input", "tap", "5", "5"], env)).code).toBe(0); // 3: nothing changes
    expect((await farm(["input", "tap", "--text", "No such label"], env)).code).not.toBe(0); // 4: fails
    const list = await steps(id);
    expect(list.map((s) => s.action)).toEqual(["tap", "tap", "tap", "tap"]);
    expect(names(list[0])).toEqual(["elements.after.json", "elements.before.json"]);
    expect(names(list[1])).toEqual(["device.log", "elements.after.json", "elements.before.json"]);
    expect(names(list[2])).toEqual(["elements.before.json"]);
    expect(names(list[3])).toEqual(["device.log", "elements.before.json"]);
    const reason = (s: Step | undefined, name: string) => s?.artifacts?.find((a) => a.name === name)?.reason;
    expect(reason(list[0], "elements.before.json")).toBe("default");
    expect(reason(list[1], "device.log")).toBe("rule 1");
    expect(reason(list[1], "elements.after.json")).toBe("rule 2");
    expect(reason(list[3], "device.log")).toBe("rule 3");
    for (const s of list) for (const a of s.artifacts ?? []) expect(a.provider).toBe(a.kind === "deviceLog" ? "adb" : "agent");
    // What only a post-hoc rule kept was taken before its outcome was known: marked speculative; the rest is not.
    const speculative = (s: Step | undefined, name: string) => s?.artifacts?.find((a) => a.name === name)?.speculative ?? false;
    expect(speculative(list[0], "elements.after.json")).toBe(true);
    expect(speculative(list[3], "device.log")).toBe(true);
    expect(speculative(list[0], "elements.before.json")).toBe(false);
    expect(speculative(list[1], "device.log")).toBe(false);

    // A client step (a wait that times out) cannot have a tree or a log: what the policy asks is disclosed as skipped.
    const waited = await farm(["wait", "--text", "No such label", "--timeout", "1s"], env);
    expect(waited.code, waited.stdout + waited.stderr).toBe(1);
    const wait = (await steps(id)).at(-1);
    expect(wait?.action).toBe("wait");
    const skipped = (wait?.artifacts ?? []).filter((a) => a.skippedReason);
    expect(skipped.map((a) => [a.name, a.reason, a.provider])).toEqual(expect.arrayContaining([["elements.before.json", "default", "coordinator"], ["device.log", "rule 3", "coordinator"]]));
    for (const a of skipped) expect(a.skippedReason).toMatch(/runs in the CLI/);
  }, 90_000);

  it("keeps a device log of the action's window only, per action with --capture, and discloses a kind it cannot supply", async () => {
    const { serial } = await lab.addDevice({ serialno: "CPOL0002" });
    const { id, env } = await session(serial, undefined);
    // Logged before the action, outside the session: not part of the step's window.
    expect((await farm(["shell", "--", "log", "-t", "e2e", "before-the-action"], { ...env, FARM_SESSION: "" })).code).toBe(0);
    const r = await farm(["shell", "--capture", "deviceLog,video", "--", "log", "-t", "e2e", "during-the-action"], env);
    expect(r.code, r.stderr).toBe(0);
    expect((await farm(["shell", "--", "log", "-t", "e2e", "after-the-action"], { ...env, FARM_SESSION: "" })).code).toBe(0);
    const [step] = await steps(id);
    const log = step?.artifacts?.find((a) => a.name === "device.log");
    expect(log).toMatchObject({ kind: "deviceLog", provider: "adb", when: "around", reason: "per-action" });
    // The video around the same action: screenrecord stopped with SIGINT once the step settled, pulled, and it decodes.
    const video = step?.artifacts?.find((a) => a.kind === "video");
    expect(video).toMatchObject({ name: "video.mp4", provider: "adb", when: "around", reason: "per-action" });
    expect(video?.sha256).toMatch(/^[0-9a-f]{64}$/);
    const files = await exported(id);
    const text = [...files.entries()].find(([name]) => name.startsWith("images/") && name.endsWith(".txt"))?.[1] ?? [...files.values()].find((v) => v.includes("during-the-action")) ?? "";
    expect(text).toContain("e2e: during-the-action");
    expect(text).not.toContain("before-the-action");
    expect(text).not.toContain("after-the-action");
    expect(text).not.toContain("farmstep");
    const mp4 = join(lab.dir.path, `export-${id}`, "images", `${video?.sha256}.mp4`);
    const probe = JSON.parse(execFileSync("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=codec_name,nb_read_frames", "-of", "json", mp4], { encoding: "utf8" })) as {
      streams: { codec_name: string; nb_read_frames: string }[];
    };
    expect(probe.streams[0]?.codec_name).toBe("h264");
    expect(Number(probe.streams[0]?.nb_read_frames)).toBeGreaterThan(0);
  }, 60_000);

  it("discloses a kind the phone cannot supply as skipped, with the reason, and the action still runs", async () => {
    const { device, serial } = await lab.addDevice({ serialno: "CPOL0005" });
    device.faults.set({ screenrecordFails: true });
    const { id, env } = await session(serial, undefined);
    const r = await farm(["input", "key", "KEYCODE_HOME", "--capture", "video"], env);
    expect(r.code, r.stderr).toBe(0);
    const [step] = await steps(id);
    expect(step?.result.ok).toBe(true);
    const video = step?.artifacts?.find((a) => a.kind === "video");
    expect(video?.sha256 ?? "").toBe("");
    expect(video?.skippedReason).toMatch(/did not start/);
  }, 60_000);

  it("drops a device log whose phone went away mid-interval, with a warning, and keeps the action's result", async () => {
    const { device, serial } = await lab.addDevice({ serialno: "CPOL0003" });
    const { id, env } = await session(serial, undefined);
    const running = farm(["shell", "--timeout", "20000", "--capture", "deviceLog", "--", "sleep", "4"], env);
    await new Promise((r) => setTimeout(r, 2_000));
    await device.vanish();
    const r = await running;
    const [step] = await steps(id);
    const log = step?.artifacts?.find((a) => a.kind === "deviceLog");
    expect(log?.sha256 ?? "").toBe("");
    expect(log?.warning).toMatch(/dropped/);
    // The action's own result is what the CLI was told.
    expect(step?.result.errorCode ?? "").toBe(r.code === 0 ? "" : String(r.json["code"]));
  }, 60_000);

  it("never stores a secret, nor any of its encodings, anywhere", async () => {
    const { serial } = await lab.addDevice({ serialno: "CPOL0004" });
    const secret = "tok/en s3cr3t&<42>";
    const forms = [secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1), "tok/en s3cr3t&amp;&lt;42&gt;", Buffer.from(`ci:${secret}`).toString("base64")];
    const { id, env } = await session(serial, { capture: ["deviceLog", "elements.after"], secrets: ["E2E_SECRET"] }, [], { E2E_SECRET: secret });
    // Single-quoted for the phone's shell: the secret holds & and <.
    const uses = [
      ["shell", "--", "log", "-t", "e2e", `'plain ${secret} encoded ${encodeURIComponent(secret)}'`],
      ["shell", "--", "echo", `'${JSON.stringify(secret)} Authorization: Basic ${forms[4]}'`],
      ["device", "setprop", "debug.e2e.value", `x${encodeURIComponent(secret)}`],
    ];
    for (const u of uses) {
      const r = await farm(u, env);
      expect(r.code, `${u.join(" ")}: ${r.stderr}`).toBe(0);
    }
    const list = await steps(id);
    expect(list.length).toBe(3);
    // Every byte under the lab's directories: databases, evidence, session files, the agent's journal.
    const hits: string[] = [];
    for (const form of forms) {
      try {
        hits.push(execFileSync("grep", ["-rlaF", "--", form, lab.dir.path], { encoding: "utf8" }).trim());
      } catch {
        // grep exits 1 when nothing matches.
      }
    }
    expect(hits.filter(Boolean)).toEqual([]);
    // The masked log is still there, with the mask where the secret was.
    const files = await exported(id);
    expect([...files.values()].some((v) => v.includes("plain [redacted]"))).toBe(true);
  }, 90_000);
});
