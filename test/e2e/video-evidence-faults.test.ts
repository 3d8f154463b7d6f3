/**
 * Managed video that does not end well, end to end (coordinator and agent as
 * separate processes, real adb, simulated phones encoding real H.264, the
 * detached worker): the bytes of a failed pull are kept and listed, and a
 * recorder the worker had to stop past its time limit is not reported as a
 * requested stop.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

interface Manifest {
  status: string;
  finishedAt: string | null;
  artifacts: { kind: string; path: string | null; status: string; bytes: number | null; sha256: string | null; error?: { code: string } }[];
  errors: { code: string; stage: string }[];
  video: { stopReason: string | null; remoteRetained: boolean };
}

let lab: SplitFarm;
const phones: SimDevice[] = [];
const animations: NodeJS.Timeout[] = [];

const sessionDir = (id: string) => join(lab.dir.path, "agent", "video", "sessions", id);
const readManifest = (dir: string) => JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as Manifest;

async function addPhone(serialno: string): Promise<{ phone: SimDevice; serial: string }> {
  const phone = new SimDevice({ serialno });
  phones.push(phone);
  const serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor(`${serialno} in farm devices`, async () => {
    const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
    return list.some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId) ? true : undefined;
  });
  // A changing scene: screenrecord writes frames only on change.
  animations.push(setInterval(() => phone.state.screen.changed(), 50));
  return { phone, serial };
}

beforeAll(async () => {
  lab = await startSplitFarm("video-faults");
  await mkdir(join(lab.dir.path, "out"));
});

afterAll(async () => {
  for (const t of animations) clearInterval(t);
  // Workers are detached: stop any this file started that is still running.
  for (const id of await readdir(join(lab.dir.path, "agent", "video", "sessions")).catch(() => [] as string[])) {
    const pid = (JSON.parse(await readFile(join(sessionDir(id), "session.json"), "utf8")) as { worker: { pid: number } | null }).worker?.pid;
    let cmdline = "";
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      // Already gone.
    }
    if (pid && cmdline.includes("worker-main")) process.kill(pid, "SIGKILL");
  }
  for (const p of phones) await p.close();
  await lab?.stop();
});

describe("video evidence that does not end well", () => {
  it("keeps the bytes of a pull cut by a vanishing phone as video.partial.mp4, listed in the manifest and stored", async () => {
    const { phone, serial } = await addPhone("VIDPULLCUT");
    const started = await farm(["evidence", "video", "start", "--device", serial, "--duration-seconds", "30"], lab.env);
    expect(started.code).toBe(0);
    const id = String(started.json["sessionId"]);
    await new Promise((r) => setTimeout(r, 2_000));
    // The phone goes away 4 KiB into the pull of the finished recording.
    phone.faults.set({ vanishAfterBytes: 4_096 });
    const stopped = await farm(["evidence", "video", "stop", "--session", id], lab.env);
    expect(stopped.code).toBe(69);
    const m = await waitFor("the terminal manifest", () => {
      const manifest = readManifest(sessionDir(id));
      return manifest.finishedAt ? manifest : undefined;
    }, { timeoutMs: 40_000, intervalMs: 250 });
    expect(m.status).not.toBe("complete");
    expect(m.errors.map((e) => e.code)).toContain("VIDEO_PULL_FAILED");
    const video = m.artifacts.find((a) => a.kind === "video");
    expect(video).toMatchObject({ path: "video.partial.mp4", status: "partial" });
    const bytes = readFileSync(join(sessionDir(id), "video.partial.mp4"));
    expect(bytes.length).toBeGreaterThan(0);
    expect(video?.bytes).toBe(bytes.length);
    expect(video?.sha256).toBe(createHash("sha256").update(bytes).digest("hex"));
    expect(existsSync(join(sessionDir(id), "video.mp4"))).toBe(false);
    // The store has the same partial bytes.
    await waitFor("the bundle stored", async () => (((await farm(["evidence", "list"], lab.env)).json["bundles"] ?? []) as { evidenceId: string }[]).some((b) => b.evidenceId === id) ? true : undefined);
    const pulled = join(lab.dir.path, "out", "pull-cut");
    expect((await farm(["evidence", "pull", id, "--output-dir", pulled], lab.env)).json).toMatchObject({ ok: true });
    expect(readFileSync(join(pulled, "video.partial.mp4"))).toEqual(bytes);
    expect((await farm(["evidence", "verify", pulled], lab.env)).code).toBe(0);
  });

  it("does not call a recorder stopped past its time limit a requested stop", async () => {
    const { phone, serial } = await addPhone("VIDOVERRUN");
    phone.faults.set({ screenrecordOverrun: true });
    const started = await farm(["evidence", "video", "start", "--device", serial, "--duration-seconds", "1", "--size", "216x480"], lab.env);
    expect(started.code).toBe(0);
    const id = String(started.json["sessionId"]);
    // Nobody asks for a stop: the worker must end the overrunning recorder itself.
    const m = await waitFor("the worker to end the overdue recorder", () => {
      const manifest = readManifest(sessionDir(id));
      return manifest.finishedAt ? manifest : undefined;
    }, { timeoutMs: 60_000, intervalMs: 500 });
    expect(await readdir(join(sessionDir(id), "stop-requests")).catch(() => [])).toEqual([]);
    // Nobody requested it and the time limit did not end it: the recorder failed to stop.
    expect(m.video.stopReason).toBe("failure");
    expect(m.errors).toContainEqual(expect.objectContaining({ code: "VIDEO_RECORDER_OVERDUE", stage: "stop" }));
    expect(m.status).not.toBe("complete");
    const captures = JSON.parse(readFileSync(join(sessionDir(id), "captures.json"), "utf8")) as { captures: { video: { stop: { requested: boolean; reason: string } } } };
    expect(captures.captures.video.stop).toMatchObject({ requested: false, reason: "overdue" });
  });
});
