/**
 * `farm assert visual` and `farm wait` end to end: `farm standalone`, a
 * real adb server, a simulated phone (its launcher and Settings) and the
 * real CLI. In a session each check is one step of the timeline, with its
 * evidence: the baseline, actual and diff images of a visual check, and the
 * diagnosis of a wait that timed out.
 */
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService } from "@farm/shared/gen/farm/v1/session_service_pb";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let admin: string;

interface Artifact {
  name: string;
  kind: string;
  provider: string;
  sha256?: string;
  size?: string;
  mimeType?: string;
  when?: string;
  reason?: string;
}
interface Step {
  sequence: number;
  action: string;
  description: string;
  arguments?: Record<string, unknown>;
  result: { ok?: boolean; errorCode?: string; errorMessage?: string; response?: Record<string, unknown> };
  artifacts?: Artifact[];
  before?: { sha256?: string; errorCode?: string };
  after?: { sha256?: string; errorCode?: string };
}

async function steps(id: string): Promise<{ session: Record<string, unknown>; steps: Step[] }> {
  const r = await farm(["session", "show", id], lab.env);
  expect(r.code, r.stderr).toBe(0);
  return { session: r.json["session"] as Record<string, unknown>, steps: r.json["steps"] as Step[] };
}

async function leaseAndSession(serial: string) {
  const l = await farm(["lease", "acquire", "--device", serial], lab.env);
  expect(l.code, l.stderr).toBe(0);
  const token = (l.json["lease"] as { token: string }).token;
  const s = await farm(["session", "start", "--device", serial], { ...lab.env, FARM_LEASE: token });
  expect(s.code, s.stderr).toBe(0);
  const id = (s.json["session"] as { sessionId: string }).sessionId;
  const device = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial };
  return { id, device, env: { ...device, FARM_SESSION: id } };
}

/** A stored file of a session (an image or a JSON artifact), by sha256. */
async function sessionFile(sessionId: string, sha256: string): Promise<Buffer> {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${admin}`);
    return next(req);
  };
  const client = createClient(SessionService, createGrpcTransport({ baseUrl: String(lab.standalone.ready["url"]), interceptors: [auth] }));
  const chunks: Uint8Array[] = [];
  for await (const res of client.readSessionImage({ sessionId, sha256 })) chunks.push(res.chunk);
  return Buffer.concat(chunks);
}

/** The devsim status bar shows HH:MM: a screenshot and its comparison must not straddle a minute. */
async function clearOfMinuteTurn(needSeconds = 20): Promise<void> {
  const s = new Date().getUTCSeconds();
  if (s > 60 - needSeconds) await new Promise((r) => setTimeout(r, (61 - s) * 1000));
}

/** The bounding box of the pixels that differ between two PNGs of one size. */
async function changedBox(a: Buffer, b: Buffer): Promise<{ x: number; y: number; w: number; h: number }> {
  const [ra, rb] = await Promise.all([a, b].map((p) => sharp(p).ensureAlpha().raw().toBuffer({ resolveWithObject: true })));
  const { width, height } = ra!.info;
  let [left, top, right, bottom] = [width, height, -1, -1];
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      if (ra!.data.readUInt32BE(i) !== rb!.data.readUInt32BE(i)) {
        left = Math.min(left, x);
        right = Math.max(right, x);
        top = Math.min(top, y);
        bottom = Math.max(bottom, y);
      }
    }
  }
  expect(right, "the screens differ").toBeGreaterThanOrEqual(0);
  return { x: left, y: top, w: right - left + 1, h: bottom - top + 1 };
}

beforeAll(async () => {
  lab = await startLab("visual-wait");
  admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("farm assert visual", () => {
  it("matches a fresh baseline, fails with a diff after navigating, passes with the change masked; each check a session step", async () => {
    const { serial } = await lab.addDevice({ serialno: "VISUAL0001" });
    const { id, env } = await leaseAndSession(serial);
    const dir = lab.dir.path;
    const baseline = join(dir, "launcher.png");

    await clearOfMinuteTurn();
    const shot = await farm(["screenshot", baseline], env);
    expect(shot.code, shot.stdout + shot.stderr).toBe(0);
    const same = await farm(["assert", "visual", "--baseline", baseline, "--output-dir", join(dir, "out")], env);
    expect(same.code, same.stdout + same.stderr).toBe(0);
    expect(same.json).toMatchObject({ ok: true, passed: true, diffPct: 0, engine: "exact", thresholdPct: 0, width: 1080, height: 2400, differentPixels: 0, comparedPixels: 1080 * 2400 });
    expect(same.json["diffFile"]).toBeUndefined();
    expect(existsSync(join(dir, "out", "launcher.actual.png"))).toBe(true);
    expect(existsSync(join(dir, "out", "launcher.diff.png"))).toBe(false);
    expect(same.json["sessionStep"]).toMatchObject({ ok: true, sessionId: id });

    const tap = await farm(["input", "tap", "--text", "Settings"], env);
    expect(tap.code, tap.stdout + tap.stderr).toBe(0);
    const waited = await farm(["wait", "--text", "Display", "--timeout", "10s"], env);
    expect(waited.code, waited.stdout + waited.stderr).toBe(0);
    expect(waited.json).toMatchObject({ ok: true, selector: { text: "Display" }, gone: false, matches: 1 });
    expect(waited.json["polls"]).toBeGreaterThanOrEqual(1);

    await clearOfMinuteTurn();
    const differs = await farm(["assert", "visual", "--baseline", baseline, "--output-dir", join(dir, "kept")], env);
    expect(differs.code, differs.stdout + differs.stderr).toBe(1);
    expect(differs.json).toMatchObject({ ok: true, passed: false, engine: "exact", code: "VISUAL_MISMATCH" });
    expect(differs.json["diffPct"]).toBeGreaterThan(0);
    const diffFile = String(differs.json["diffFile"]);
    expect((await sharp(await readFile(diffFile)).metadata()).width).toBe(1080);
    // The screen is its owner's only: a directory the check creates is 0700, its files 0600.
    expect(diffFile).toBe(join(dir, "kept", "launcher.diff.png"));
    expect((await stat(join(dir, "kept"))).mode & 0o777).toBe(0o700);
    for (const f of [diffFile, String((differs.json["actual"] as { file: string }).file)]) expect((await stat(f)).mode & 0o777, f).toBe(0o600);

    // A small change (a switch toggled), masked: the rest of the screen matches.
    expect((await farm(["input", "tap", "--text", "Network & internet"], env)).code).toBe(0);
    expect((await farm(["wait", "--text", "Wi-Fi"], env)).code).toBe(0);
    await clearOfMinuteTurn();
    const network = join(dir, "network.png");
    expect((await farm(["screenshot", network], env)).code).toBe(0);
    expect((await farm(["input", "tap", "--text", "Wi-Fi"], env)).code).toBe(0);
    const toggled = join(dir, "toggled.png");
    expect((await farm(["screenshot", toggled], env)).code).toBe(0);
    const box = await changedBox(await readFile(network), await readFile(toggled));
    expect(box.w * box.h).toBeLessThan((1080 * 2400) / 10);
    const masked = await farm(["assert", "visual", "--baseline", network, "--mask", `${box.x},${box.y},${box.w},${box.h}`, "--engine", "pixelmatch"], env);
    expect(masked.code, masked.stdout + masked.stderr).toBe(0);
    expect(masked.json).toMatchObject({ passed: true, diffPct: 0, engine: "pixelmatch", maskedPixels: box.w * box.h, comparedPixels: 1080 * 2400 - box.w * box.h });
    // Without the mask the same screen fails. Without --output-dir nothing is written: the session keeps the diff.
    const tmp = join(dir, "tmp");
    await mkdir(tmp);
    const unmasked = await farm(["assert", "visual", "--baseline", network, "--engine", "pixelmatch"], { ...env, TMPDIR: tmp });
    expect(unmasked.code, unmasked.stdout + unmasked.stderr).toBe(1);
    expect(unmasked.json["diffPct"]).toBeGreaterThan(0);
    expect(unmasked.json["diffFile"]).toBeUndefined();
    expect(await readdir(tmp)).toEqual([]);

    const { session, steps: list } = await steps(id);
    expect(list.map((s) => [s.action, s.result.ok ?? false])).toEqual([
      ["assert-visual", true],
      ["tap", true],
      ["wait", true],
      ["assert-visual", false],
      ["tap", true],
      ["wait", true],
      ["tap", true],
      ["assert-visual", true],
      ["assert-visual", false],
    ]);
    expect(session).toMatchObject({ stepCount: 9, failedStepCount: 2 });
    const failed = list[3] as Step;
    expect(failed.description).toBe("visual check against launcher.png (exact, threshold 0%)");
    expect(failed.arguments).toMatchObject({ baseline: { name: "launcher.png", sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }, masks: [], threshold: 0, engine: "exact" });
    expect(failed.result.errorCode).toBe("VISUAL_MISMATCH");
    // Like a routed step: the screen compared is the step's before, the screen once checked its after.
    expect(failed.before?.sha256).toBe((differs.json["actual"] as { sha256: string }).sha256);
    expect(failed.after?.sha256).toMatch(/^[0-9a-f]{64}$/);
    for (const s of list) for (const side of [s.before, s.after]) expect(side?.sha256, `step ${s.sequence} ${s.action}`).toMatch(/^[0-9a-f]{64}$/);
    expect(await sharp(await sessionFile(id, String(failed.before?.sha256))).metadata()).toMatchObject({ format: "png", width: 1080, height: 2400 });
    expect(failed.result.errorMessage).toMatch(/differs from launcher\.png/);
    expect(failed.result.response).toMatchObject({ engine: "exact", thresholdPct: 0, width: 1080, height: 2400, diffPct: differs.json["diffPct"] });
    const byName = new Map((failed.artifacts ?? []).map((a) => [a.name, a]));
    expect([...byName.keys()].sort()).toEqual(["actual.png", "baseline.png", "diff.png"]);
    expect(byName.get("baseline.png")).toMatchObject({ kind: "visual", provider: "runner", when: "baseline", mimeType: "image/png" });
    expect(byName.get("actual.png")).toMatchObject({ kind: "visual", provider: "agent", when: "actual", mimeType: "image/png" });
    expect(byName.get("diff.png")).toMatchObject({ kind: "visual", provider: "runner", when: "diff", mimeType: "image/png" });
    // The baseline kept is the file given; the diff is a PNG of the screen's size.
    expect(byName.get("baseline.png")?.sha256).toBe((failed.arguments?.["baseline"] as { sha256: string }).sha256);
    const diff = await sessionFile(id, String(byName.get("diff.png")?.sha256));
    expect(await sharp(diff).metadata()).toMatchObject({ format: "png", width: 1080, height: 2400 });
    // A check that passed keeps no diff.
    expect((list[0]?.artifacts ?? []).map((a) => a.name).sort()).toEqual(["actual.png", "baseline.png"]);
    expect(list[7]).toMatchObject({ arguments: { masks: [box], engine: "pixelmatch" }, result: { response: { maskedPixels: box.w * box.h } } });
    // The wait is one step: its polls are not.
    expect(list[2]).toMatchObject({ description: "wait for text \"Display\"", arguments: { selector: { text: "Display" }, gone: false } });
  }, 120_000);
});

describe("farm wait", () => {
  it("times out in a session as one failed step with a wait-timeout.json diagnosis", async () => {
    const { serial } = await lab.addDevice({ serialno: "VISUAL0002" });
    const { id, env } = await leaseAndSession(serial);
    const r = await farm(["wait", "--text", "NoSuchThing", "--timeout", "1500ms"], env);
    expect(r.code, r.stdout + r.stderr).toBe(1);
    expect(r.json).toMatchObject({ ok: false, code: "COMMAND_TIMEOUT" });
    expect(r.json["polls"]).toBeGreaterThan(0);
    expect(r.json["sessionStep"]).toMatchObject({ ok: true, sessionId: id });
    // Without --output-dir the diagnosis is summed up on stderr.
    expect(r.stderr).toMatch(/farm wait: no element with text "NoSuchThing" appeared within 1500 ms/);

    const { session, steps: list } = await steps(id);
    expect(session).toMatchObject({ stepCount: 1, failedStepCount: 1 });
    const last = list.at(-1) as Step;
    expect(last).toMatchObject({ action: "wait", description: "wait for text \"NoSuchThing\"", result: { errorCode: "COMMAND_TIMEOUT" } });
    expect(last.result.ok ?? false).toBe(false);
    expect(last.artifacts).toHaveLength(1);
    // The screen as the wait started and as it gave up: the after shows what was there instead.
    expect(last.before?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(last.after?.sha256).toMatch(/^[0-9a-f]{64}$/);
    const artifact = last.artifacts?.[0] as Artifact;
    expect(artifact).toMatchObject({ name: "wait-timeout.json", kind: "diagnosis", provider: "runner", mimeType: "application/json", reason: "always" });
    const doc = JSON.parse((await sessionFile(id, String(artifact.sha256))).toString("utf8")) as Record<string, unknown>;
    expect(doc["polls"]).toBeGreaterThan(0);
    expect(doc["polls"]).toBe(r.json["polls"]);
    expect((doc["trace"] as unknown[]).length).toBe(doc["polls"]);
    expect(doc["firstNonEmptyAtMs"]).toEqual(expect.any(Number));
    const elements = doc["elements"] as { text: string; bounds: object }[];
    expect(elements.length).toBeGreaterThan(0);
    expect(elements.some((e) => e.text === "Settings")).toBe(true);
    expect((doc["tree"] as unknown[]).length).toBeGreaterThan(0);
    expect(doc["result"]).toMatchObject({ code: "COMMAND_TIMEOUT" });
    expect(doc["provenance"]).toMatchObject({ farmVersion: expect.stringMatching(/^\d+\.\d+\.\d+/), sessionId: id, policySha256: "" });
  }, 60_000);

  it("outside a session: succeeds at once, --gone too, and a timeout writes its diagnosis to --output-dir", async () => {
    const { serial } = await lab.addDevice({ serialno: "VISUAL0003" });
    const { id, device } = await leaseAndSession(serial);
    // In a session, a check on another phone is refused before it starts, and not recorded.
    const elsewhere = await farm(["wait", "--text", "Settings", "--device", "127.0.0.1:1"], { ...device, FARM_SESSION: id });
    expect(elsewhere.code, elsewhere.stdout + elsewhere.stderr).toBe(64);
    expect(elsewhere.json).toMatchObject({ ok: false, code: "SESSION_MISMATCH", field: "device" });
    expect((await steps(id)).steps).toEqual([]);

    const present = await farm(["wait", "--text", "Settings"], device);
    expect(present.code, present.stdout + present.stderr).toBe(0);
    expect(present.json).toMatchObject({ ok: true, polls: 1, matches: 1, elements: [expect.objectContaining({ text: "Settings" })] });
    expect(present.json["sessionStep"]).toBeUndefined();
    const gone = await farm(["wait", "--text", "Display", "--gone"], device);
    expect(gone.code, gone.stdout + gone.stderr).toBe(0);
    expect(gone.json).toMatchObject({ ok: true, gone: true, polls: 1 });

    const out = join(lab.dir.path, "diag");
    const r = await farm(["wait", "--desc", "NoSuchThing", "--timeout", "800ms", "--interval", "100ms", "--output-dir", out], device);
    expect(r.code, r.stdout + r.stderr).toBe(1);
    expect(r.json).toMatchObject({ ok: false, code: "COMMAND_TIMEOUT", diagnosisFile: join(out, "wait-timeout.json") });
    const doc = JSON.parse(await readFile(join(out, "wait-timeout.json"), "utf8")) as Record<string, unknown>;
    expect(doc["polls"]).toBeGreaterThan(1);
    expect(doc["selector"]).toEqual({ contentDesc: "NoSuchThing" });
    expect(doc["provenance"]).toMatchObject({ sessionId: "", policySha256: "" });
    expect((doc["elements"] as unknown[]).length).toBeGreaterThan(0);
  }, 60_000);
});
