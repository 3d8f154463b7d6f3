/**
 * Managed video end to end: coordinator and agent as separate processes, a
 * private adb server, simulated phones whose screenrecord encodes real
 * H.264 with ffmpeg, and the detached workers the agent starts.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice, type AdbServer } from "../devsim/index.js";
import { farm, startFarm, waitFor, type CliResult, type FarmProcess } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";
import type { TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let adb: AdbServer;
let lab: SplitFarm;
let agent: FarmProcess;
let env: NodeJS.ProcessEnv;
let agentArgs: string[];
const phones: SimDevice[] = [];
const animations: NodeJS.Timeout[] = [];

interface Video {
  requestedSize: { width: number; height: number };
  actualSize: { width: number; height: number } | null;
  mediaDurationMs: number | null;
  hostDurationMs: number | null;
  codec: string | null;
  stopReason: string | null;
  remotePath: string;
  remoteRetained: boolean;
}
interface Manifest {
  evidenceId: string;
  kind: string;
  status: string;
  finishedAt: string | null;
  artifacts: { kind: string; path: string | null; status: string; sha256: string | null }[];
  errors: { code: string }[];
  video: Video;
}

async function addPhone(serialno: string, opts: { serials?: number; animate?: boolean } = {}): Promise<{ phone: SimDevice; serials: string[] }> {
  const phone = new SimDevice({ serialno });
  phones.push(phone);
  const serials: string[] = [];
  // Listening twice puts one phone behind two adb serials.
  for (let i = 0; i < (opts.serials ?? 1); i++) serials.push(await adbConnect(adb.port, "127.0.0.1", await phone.listen()));
  await waitFor(`${serialno} in farm devices`, async () => {
    const list = ((await farm(["devices"], env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
    return serials.every((s) => list.some((d) => d.serial === s && d.state === "device" && d.properties.physicalId)) ? true : undefined;
  });
  // A changing scene: screenrecord, like the real one, writes frames only on change.
  if (opts.animate !== false) animations.push(setInterval(() => phone.state.screen.changed(), 50));
  return { phone, serials };
}

const out = (name: string) => join(dir.path, "out", name);
const sessionDir = (id: string) => join(dir.path, "agent", "video", "sessions", id);
const readManifest = (bundle: string) => JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8")) as Manifest;
const start = (serial: string, more: string[] = []) => farm(["evidence", "video", "start", "--device", serial, "--duration-seconds", "30", "--size", "216x480", ...more], env);

/**
 * Stops a recording once the phone's screenrecord has handed its encoder
 * three more frames (devsim's count): a recording stopped before its second
 * frame has no media timeline (VIDEO_EMPTY). The recording is live once start
 * answered, so frames counted from then are its own; an event, where a pause
 * of a second was no promise under load and idle time on a quiet machine.
 */
async function stopAfterFrames(phone: SimDevice, sessionId: string): Promise<CliResult> {
  await framesRecorded(phone);
  return farm(["evidence", "video", "stop", "--session", sessionId], env);
}

function framesRecorded(phone: SimDevice, more = 3): Promise<void> {
  return phone.state.recordedFrames.reached(phone.state.recordedFrames.value + more);
}

function ffprobeSize(file: string): { width: number; height: number; codec: string } {
  const text = execFileSync("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height,codec_name", "-of", "json", file], { encoding: "utf8" });
  const s = (JSON.parse(text) as { streams: { width: number; height: number; codec_name: string }[] }).streams[0]!;
  return { width: s.width, height: s.height, codec: s.codec_name };
}

/** A complete bundle: verified video matching actualSize, stored, files as the manifest says. */
async function expectCompleteBundle(bundle: string, sessionId: string): Promise<Manifest> {
  const m = readManifest(bundle);
  expect(m).toMatchObject({ evidenceId: sessionId, kind: "video", status: "complete" });
  expect(m.finishedAt).not.toBeNull();
  expect(m.video.codec).toBe("h264");
  expect(m.video.mediaDurationMs).toBeGreaterThan(0);
  expect(m.video.hostDurationMs).toBeGreaterThan(0);
  expect(m.video.remoteRetained).toBe(false);
  const probed = ffprobeSize(join(bundle, "video.mp4"));
  expect({ width: probed.width, height: probed.height }).toEqual(m.video.actualSize);
  expect(m.video.actualSize).toEqual(m.video.requestedSize);
  expect(existsSync(join(bundle, "video.partial.mp4"))).toBe(false);
  expect(m.artifacts.map((a) => a.kind).sort()).toEqual(["capture_envelopes", "encoder_stderr", "video"]);
  const verify = await farm(["evidence", "verify", bundle], env);
  expect(verify.code).toBe(0);
  return m;
}

beforeAll(async () => {
  lab = await startSplitFarm("video");
  ({ dir, adb, env, agentArgs, agent } = lab);
  await mkdir(join(dir.path, "out"));
});

afterAll(async () => {
  for (const t of animations) clearInterval(t);
  // Workers are detached: stop any this file started that is still running.
  for (const id of await readdir(join(dir.path, "agent", "video", "sessions")).catch(() => [] as string[])) {
    const pid = (JSON.parse(await readFile(join(sessionDir(id), "session.json"), "utf8")) as { worker: { pid: number } | null }).worker?.pid;
    if (pid && readFileSafe(`/proc/${pid}/cmdline`).includes("worker-main")) process.kill(pid, "SIGKILL");
  }
  await agent?.stop();
  for (const p of phones) await p.close();
  await lab?.stop();
});

function readFileSafe(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

describe("farm evidence video", () => {
  // The argument matrix is test/contract/video-refusals.test.ts. What stays here is the one
  // refusal the agent makes after reading the display: a size whose aspect is not the phone's.
  it("refuses a size whose aspect is not the display's, without a bundle dir or a session", async () => {
    const { serials } = await addPhone("VIDBAD", { animate: false });
    const bundle = out("bad-aspect");
    const r = await farm(["evidence", "video", "start", "--device", serials[0]!, "--duration-seconds", "5", "--size", "480x480", "--output-dir", bundle], env);
    expect(r.code).toBe(64);
    expect(r.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "size" });
    expect(existsSync(bundle)).toBe(false);
    expect((await farm(["evidence", "video", "list"], env)).json["recordings"]).toEqual([]);
  });

  it("records until stopped, verifies every frame, stores the bundle and fills --output-dir", async () => {
    const { phone, serials } = await addPhone("VIDSTOP");
    const bundle = out("stop");
    const started = await start(serials[0]!, ["--output-dir", bundle, "--label", "checkout flow", "--context-json", "{\"originalVerdict\":\"failed\"}"]);
    expect(started.code).toBe(0);
    expect(started.json).toMatchObject({ ok: true, status: "recording", manifestPath: join(bundle, "manifest.json"), workerAvailable: true });
    const id = String(started.json["recordingId"]);
    // sessionId is recordingId's old name, kept for scripts.
    expect(started.json["sessionId"]).toBe(id);
    // While recording: an active manifest, no finish time, no stop reason.
    const active = readManifest(bundle);
    expect(active.finishedAt).toBeNull();
    expect(active.video.stopReason).toBeNull();
    const status = await farm(["evidence", "video", "status", "--recording", join(bundle, "manifest.json")], env);
    expect(status.code).toBe(0);
    expect(status.json).toMatchObject({ ok: true, status: "recording", recordingId: id });
    // The saved target wins: another device is an error, not a redirect.
    const conflicting = await farm(["evidence", "video", "status", "--recording", bundle, "--device", "someone-else"], env);
    expect(conflicting.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "device" });

    await framesRecorded(phone);
    const stopped = await farm(["evidence", "video", "stop", "--session", join(bundle, "manifest.json")], env);
    expect(stopped.code).toBe(0);
    expect(stopped.json).toMatchObject({ ok: true, status: "complete", stored: true });
    const m = await expectCompleteBundle(bundle, id);
    expect(m.video.stopReason).toBe("requested");
    expect(m.video.requestedSize).toEqual({ width: 216, height: 480 });
    expect(m).toMatchObject({ label: "checkout flow", context: { originalVerdict: "failed" } });

    // Repeated stop: the same outcome, the bundle untouched.
    const before = readFileSync(join(bundle, "manifest.json"), "utf8");
    // --session, the old spelling of --recording, still works.
    const again = await farm(["evidence", "video", "stop", "--session", id], env);
    expect(again.code).toBe(0);
    expect(again.json).toMatchObject({ status: "complete", recordingId: id });
    expect(readFileSync(join(bundle, "manifest.json"), "utf8")).toBe(before);
    // In the store too, and pullable by anyone.
    const listed = (await farm(["evidence", "list", "--device", serials[0]!], env)).json["bundles"] as { evidenceId: string; kind: string; status: string }[];
    expect(listed).toContainEqual(expect.objectContaining({ evidenceId: id, kind: "video", status: "complete" }));
    const pulled = out("stop-pulled");
    expect((await farm(["evidence", "pull", id, "--output-dir", pulled], env)).code).toBe(0);
    expect(readFileSync(join(pulled, "video.mp4"))).toEqual(readFileSync(join(bundle, "video.mp4")));
    // The device's temporary file is gone after verification.
    const sessions = (await farm(["evidence", "video", "list", "--device", serials[0]!], env)).json["recordings"] as { recordingId: string; status: string }[];
    expect(sessions).toEqual([expect.objectContaining({ recordingId: id, status: "complete" })]);

    // Release of a finished session is a no-op that says so: the bundle and session.json are untouched.
    const sessionJson = readFileSync(join(sessionDir(id), "session.json"), "utf8");
    const agentManifest = readFileSync(join(sessionDir(id), "manifest.json"), "utf8");
    const released = await farm(["evidence", "video", "release", "--session", id, "--reason", "nothing to release"], env);
    expect(released.code).toBe(0);
    expect(released.json).toMatchObject({ ok: true, released: false, status: "complete", recoveryState: "none" });
    expect(String(released.json["message"])).toContain("finished");
    expect(readFileSync(join(sessionDir(id), "session.json"), "utf8")).toBe(sessionJson);
    expect(readFileSync(join(sessionDir(id), "manifest.json"), "utf8")).toBe(agentManifest);
    expect(readFileSync(join(bundle, "manifest.json"), "utf8")).toBe(before);
    expect((await farm(["evidence", "video", "status", "--session", id], env)).json).toMatchObject({ ok: true, status: "complete", recoveryState: "none" });
  });

  it("ends at the device's time limit on its own, with the default size", async () => {
    const { serials } = await addPhone("VIDCAP");
    const started = await farm(["evidence", "video", "start", "--device", serials[0]!, "--duration-seconds", "2"], env);
    expect(started.code).toBe(0);
    const id = String(started.json["sessionId"]);
    // Nobody stops it: the worker finishes and the agent stores the bundle.
    const done = await waitFor("the capped recording to be stored", async () => {
      const r = await farm(["evidence", "video", "status", "--session", id], env);
      return r.json["status"] === "complete" && r.json["stored"] === true ? r : undefined;
      // Bounded by the test's own timeout: under load the worker's verification and the upload take what they take.
    }, { timeoutMs: 110_000, intervalMs: 250 });
    expect(done.code).toBe(0);
    const bundle = out("cap");
    expect((await farm(["evidence", "pull", id, "--output-dir", bundle], env)).code).toBe(0);
    const m = await expectCompleteBundle(bundle, id);
    expect(m.video.stopReason).toBe("duration_cap");
    // 1080x2400 scaled to a long edge of 1280, even edges.
    expect(m.video.requestedSize).toEqual({ width: 576, height: 1280 });
    const stop = await farm(["evidence", "video", "stop", "--session", id], env);
    expect(stop.code).toBe(0);
    expect(stop.json).toMatchObject({ status: "complete" });
  }, 120_000);

  it("refuses a second recording of one phone, also through its other serial", async () => {
    const { phone, serials } = await addPhone("VIDALIAS", { serials: 2 });
    expect(serials).toHaveLength(2);
    const first = await start(serials[0]!);
    expect(first.code).toBe(0);
    const id = String(first.json["sessionId"]);
    for (const serial of serials) {
      const bundle = out(`alias-${serials.indexOf(serial)}`);
      const second = await start(serial, ["--output-dir", bundle]);
      expect(second.code).toBe(75);
      expect(second.json).toMatchObject({ ok: false, code: "EVIDENCE_RECORDING_ACTIVE" });
      expect(String(second.json["message"])).toContain(id);
      expect(existsSync(bundle)).toBe(false);
    }
    // Concurrent stops: both see the one outcome. Each that arrives while it records writes its own request;
    // on a busy machine the second may start after the session ended, and a finished session is not touched.
    await framesRecorded(phone);
    const [a, b] = await Promise.all([farm(["evidence", "video", "stop", "--session", id], env), farm(["evidence", "video", "stop", "--session", id], env)]);
    expect([a.code, b.code]).toEqual([0, 0]);
    expect(a.json).toMatchObject({ status: "complete", sessionId: id });
    expect(b.json).toMatchObject({ status: "complete", sessionId: id });
    const requests = (await readdir(join(sessionDir(id), "stop-requests"))).length;
    expect(requests).toBeGreaterThanOrEqual(1);
    expect(requests).toBeLessThanOrEqual(2);
    // The lock went with the finished session.
    const next = await start(serials[1]!);
    expect(next.code).toBe(0);
    expect((await stopAfterFrames(phone, String(next.json["sessionId"]))).code).toBe(0);
  });

  it("records one of two starts at once through two serials of one phone and refuses the other as RECORDING_ACTIVE, every time", async () => {
    const { phone, serials } = await addPhone("VIDRACE", { serials: 2 });
    // A race lost by luck would pass once: each round starts both at the same moment.
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(serials.map((serial) => start(serial)));
      const winners = results.filter((r) => r.code === 0);
      const losers = results.filter((r) => r.code !== 0);
      expect(winners, `round ${round}: ${JSON.stringify(results.map((r) => r.json))}`).toHaveLength(1);
      const id = String(winners[0]!.json["sessionId"]);
      expect(winners[0]!.json).toMatchObject({ ok: true, status: "recording" });
      expect(losers[0]!.code).toBe(75);
      expect(losers[0]!.json, `round ${round}`).toMatchObject({ ok: false, code: "EVIDENCE_RECORDING_ACTIVE" });
      expect(String(losers[0]!.json["message"])).toContain(id);
      // The winner finishes and gives the phone back for the next round.
      const stopped = await stopAfterFrames(phone, id);
      expect(stopped.json, `round ${round}`).toMatchObject({ ok: true, status: "complete" });
    }
  });

  it("keeps an idle recording (no decoded duration) partial", async () => {
    const { serials } = await addPhone("VIDIDLE", { animate: false });
    const bundle = out("idle");
    const started = await start(serials[0]!, ["--output-dir", bundle]);
    expect(started.code).toBe(0);
    await new Promise((r) => setTimeout(r, 800));
    const stopped = await farm(["evidence", "video", "stop", "--session", bundle], env);
    expect(stopped.code).toBe(69);
    expect(stopped.json).toMatchObject({ ok: false, status: "partial", code: "EVIDENCE_CAPTURE_FAILED" });
    const m = readManifest(bundle);
    expect(m.status).toBe("partial");
    expect(m.errors.map((e) => e.code)).toContain("VIDEO_EMPTY");
    expect(existsSync(join(bundle, "video.mp4"))).toBe(false);
    expect(m.artifacts.find((a) => a.kind === "video")).toMatchObject({ path: "video.partial.mp4", status: "partial" });
    expect(m.video.remoteRetained).toBe(true);
    // A finished partial session: release changes nothing, and says so with ok true and exit 0.
    const id = String(started.json["sessionId"]);
    const sessionJson = readFileSync(join(sessionDir(id), "session.json"), "utf8");
    const released = await farm(["evidence", "video", "release", "--session", id, "--reason", "nothing to release"], env);
    expect(released.code).toBe(0);
    expect(released.json).toMatchObject({ ok: true, released: false, status: "partial", recoveryState: "none" });
    expect(readFileSync(join(sessionDir(id), "session.json"), "utf8")).toBe(sessionJson);
    expect(readManifest(bundle)).toEqual(m);
  });

  it("reports an encoder that cannot start as a startup failure, and gives the phone back", async () => {
    const { phone, serials } = await addPhone("VIDENC");
    phone.faults.set({ screenrecordFails: true });
    const bundle = out("encoder");
    const started = await start(serials[0]!, ["--output-dir", bundle]);
    expect(started.code).toBe(69);
    expect(started.json).toMatchObject({ ok: false, status: "failed", code: "VIDEO_STARTUP_FAILED" });
    const m = readManifest(bundle);
    expect(m.video.stopReason).toBe("startup_failure");
    expect(m.finishedAt).not.toBeNull();
    expect(existsSync(join(bundle, "video.mp4"))).toBe(false);
    expect(readFileSync(join(bundle, "encoder.stderr.txt"), "utf8")).toContain("unable to configure video/avc codec");
    phone.faults.set({ screenrecordFails: null });
    const next = await start(serials[0]!);
    expect(next.code).toBe(0);
    expect((await stopAfterFrames(phone, String(next.json["sessionId"]))).code).toBe(0);
  });

  it("answers COMMAND_TIMEOUT with the session id when the recorder is not confirmed within 5 s, and stops it", async () => {
    const { phone, serials } = await addPhone("VIDSLOW");
    // The recorder starts, but the worker cannot see it: its ps hangs past the startup window.
    phone.faults.set({ hangServices: ["shell,v2,raw:ps "] });
    const t0 = Date.now();
    const started = await start(serials[0]!);
    // Later ps calls (the worker's cleanup) answer again.
    phone.faults.set({ hangServices: null });
    expect(started.code).toBe(1);
    expect(started.json).toMatchObject({ ok: false, code: "COMMAND_TIMEOUT" });
    const id = String(started.json["sessionId"]);
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.now() - t0).toBeLessThan(15_000);
    // Status stays available; the worker ends the session as a startup failure.
    const done = await waitFor("the session to end", async () => {
      const r = await farm(["evidence", "video", "status", "--session", id], env);
      return r.json["status"] === "failed" ? r : undefined;
    }, { timeoutMs: 30_000, intervalMs: 250 });
    expect((done.json["video"] as Video).stopReason).toBe("startup_failure");
    // Its lock went with it.
    const next = await start(serials[0]!);
    expect(next.code).toBe(0);
    expect((await stopAfterFrames(phone, String(next.json["sessionId"]))).code).toBe(0);
  });

  it("never calls corrupt media video.mp4", async () => {
    const { phone, serials } = await addPhone("VIDBROKEN");
    phone.faults.set({ screenrecordCorrupt: true });
    const bundle = out("corrupt");
    expect((await start(serials[0]!, ["--output-dir", bundle])).code).toBe(0);
    await framesRecorded(phone);
    const stopped = await farm(["evidence", "video", "stop", "--session", bundle], env);
    expect(stopped.code).toBe(69);
    expect(stopped.json["status"]).toBe("failed");
    const m = readManifest(bundle);
    expect(m.errors.map((e) => e.code)).toContain("VIDEO_DECODE_FAILED");
    expect(existsSync(join(bundle, "video.mp4"))).toBe(false);
    expect(existsSync(join(bundle, "video.partial.mp4"))).toBe(true);
    // Probe facts are kept; the device keeps its copy for recovery.
    expect(m.video.codec).toBe("h264");
    expect(m.video.remoteRetained).toBe(true);
  });

  it("fails a recording whose phone vanishes, keeping the remote path and the lock until an operator releases it", async () => {
    const { phone, serials } = await addPhone("VIDGONE");
    const started = await start(serials[0]!);
    expect(started.code).toBe(0);
    const id = String(started.json["sessionId"]);
    await framesRecorded(phone);
    await phone.vanish();
    const failed = await waitFor("the worker to give up", async () => {
      const r = await farm(["evidence", "video", "status", "--session", id], env);
      return r.json["status"] === "failed" ? r : undefined;
    }, { timeoutMs: 40_000, intervalMs: 250 });
    expect(failed.code).toBe(69);
    const video = failed.json["video"] as Video;
    expect(video.stopReason).toBe("failure");
    expect(video.remoteRetained).toBe(true);
    expect(video.remotePath).toBe(`/data/local/tmp/farm-video-${id}.mp4`);
    // Nobody could see the recorder end: recovery is an operator's call.
    expect(failed.json).toMatchObject({ code: "EVIDENCE_RECOVERY_REQUIRED", recoveryState: "recovery_required" });
    await phone.restore();
    await waitFor("the phone back", async () => (((await farm(["devices", "--state", "device"], env)).json["devices"] as { serial: string }[]) ?? []).some((d) => d.serial === serials[0]) ? true : undefined, { timeoutMs: 20_000 });
    const refused = await start(serials[0]!);
    expect(refused.json).toMatchObject({ code: "EVIDENCE_RECOVERY_REQUIRED" });
    const inspect = await farm(["evidence", "video", "inspect", "--session", id], env);
    expect(inspect.code).toBe(0);
    expect(String(inspect.json["remoteFile"])).toContain(`farm-video-${id}.mp4`);
    expect(inspect.json["recorderProcesses"]).toBe("");
    const released = await farm(["evidence", "video", "release", "--session", id, "--reason", "phone replugged; recorder gone"], env);
    expect(released.code).toBe(0);
    expect(released.json).toMatchObject({ ok: true, released: true, status: "failed", recoveryState: "released" });
    const next = await start(serials[0]!);
    expect(next.code).toBe(0);
    expect((await stopAfterFrames(phone, String(next.json["sessionId"]))).code).toBe(0);
  });

  it("reports a killed worker as failed and keeps its lock: recovery is required", async () => {
    const { serials } = await addPhone("VIDWORKER");
    const started = await start(serials[0]!);
    expect(started.code).toBe(0);
    const id = String(started.json["sessionId"]);
    const inspect = await farm(["evidence", "video", "inspect", "--session", id], env);
    expect(inspect.json["recorderIdentityVerified"]).toBe(true);
    const worker = (inspect.json["sessionFile"] as { worker: { pid: number } }).worker.pid;
    expect(readFileSafe(`/proc/${worker}/cmdline`)).toContain("worker-main");
    process.kill(worker, "SIGKILL");
    const gone = await waitFor("the heartbeat to go stale", async () => {
      const r = await farm(["evidence", "video", "status", "--session", id], env);
      return r.json["workerAvailable"] === false ? r : undefined;
    }, { timeoutMs: 15_000, intervalMs: 250 });
    expect(gone.code).toBe(69);
    expect(gone.json).toMatchObject({ ok: false, status: "failed", code: "EVIDENCE_RECOVERY_REQUIRED" });
    // The last persisted manifest stays as it was: still active, nothing invented.
    const manifest = JSON.parse(readFileSync(join(sessionDir(id), "manifest.json"), "utf8")) as Manifest;
    expect(manifest.finishedAt).toBeNull();
    const again = await start(serials[0]!);
    expect(again.json).toMatchObject({ ok: false, code: "EVIDENCE_RECOVERY_REQUIRED" });
    const stop = await farm(["evidence", "video", "stop", "--session", id], env);
    expect(stop.code).toBe(69);
    expect(stop.json).toMatchObject({ status: "failed", code: "EVIDENCE_RECOVERY_REQUIRED" });
    // A user token may not release; the admin may once the recorder is proven gone.
    const user = await farm(["token", "create", "--kind", "user", "--name", "dev"], env);
    const asUser = await farm(["evidence", "video", "release", "--session", id, "--reason", "x"], { ...env, FARM_TOKEN: String(user.json["token"]) });
    expect(asUser.json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    const released = await farm(["evidence", "video", "release", "--session", id, "--reason", "worker killed in a test"], env);
    expect(released.code).toBe(0);
    expect(released.json).toMatchObject({ ok: true, released: true, recoveryState: "released" });
    // Released once: a second release changes nothing and says so.
    const sessionJson = readFileSync(join(sessionDir(id), "session.json"), "utf8");
    const twice = await farm(["evidence", "video", "release", "--session", id, "--reason", "again"], env);
    expect(twice.code).toBe(0);
    expect(twice.json).toMatchObject({ ok: true, released: false, recoveryState: "released" });
    expect(readFileSync(join(sessionDir(id), "session.json"), "utf8")).toBe(sessionJson);
    expect((await farm(["evidence", "video", "status", "--session", id], env)).json).toMatchObject({ status: "failed", recoveryState: "released" });
  });

  it("keeps recording through an agent SIGKILL and completes on stop after the restart", async () => {
    const { serials } = await addPhone("VIDAGENT");
    const started = await start(serials[0]!);
    expect(started.code).toBe(0);
    const id = String(started.json["sessionId"]);
    agent.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 1_000));
    const offline = await farm(["evidence", "video", "status", "--session", id], env);
    expect(offline.json).toMatchObject({ ok: false, code: "AGENT_OFFLINE" });
    // The worker did not notice: its heartbeat is still fresh.
    const hb = JSON.parse(readFileSync(join(sessionDir(id), "heartbeat.json"), "utf8")) as { atMs: number };
    expect(Date.now() - hb.atMs).toBeLessThan(2_000);
    agent = await startFarm(agentArgs);
    await waitFor("the agent back", async () => ((await farm(["agents"], env)).json["agents"] as { online: boolean }[] | undefined)?.[0]?.online ? true : undefined);
    const stopped = await farm(["evidence", "video", "stop", "--session", id], env);
    expect(stopped.code).toBe(0);
    expect(stopped.json).toMatchObject({ status: "complete", stored: true });
    const bundle = out("agent-killed");
    expect((await farm(["evidence", "pull", id, "--output-dir", bundle], env)).code).toBe(0);
    const m = await expectCompleteBundle(bundle, id);
    expect(m.video.stopReason).toBe("requested");
  });
});
