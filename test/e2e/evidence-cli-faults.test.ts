/**
 * The CLI's side of evidence under faults, end to end (real adb server,
 * simulated phones, `farm standalone`, the CLI): output dirs claimed only
 * once the coordinator accepted the request, a conflicting --device refused
 * before a video stop, a full disk as an evidence failure, verify judging
 * content, and repeated single-value flags refused.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimDevice } from "../devsim/index.js";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let phone: { device: SimDevice; serial: string };
let animation: NodeJS.Timeout | undefined;

interface Manifest {
  evidenceId: string;
  status: string;
  artifacts: { kind: string; path: string | null; status: string; bytes: number | null; sha256: string | null }[];
}

const out = (name: string) => join(lab.dir.path, "out", name);
const manifestOf = async (dir: string) => JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as Manifest;
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const sessionsDir = () => join(String(lab.env["FARM_HOME"]), "agent", "video", "sessions");

beforeAll(async () => {
  lab = await startLab("evidence-cli-faults");
  await mkdir(join(lab.dir.path, "out"));
  phone = await lab.addDevice({ serialno: "CLIFAULT01" });
});

afterAll(async () => {
  if (animation) clearInterval(animation);
  // Recording workers are detached: stop any this file started that still runs.
  for (const id of await readdir(sessionsDir()).catch(() => [] as string[])) {
    const session = await readFile(join(sessionsDir(), id, "session.json"), "utf8").catch(() => "{}");
    const pid = (JSON.parse(session) as { worker?: { pid: number } | null }).worker?.pid;
    const cmdline = pid ? await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "") : "";
    if (pid && cmdline.includes("worker-main")) process.kill(pid, "SIGKILL");
  }
  await lab?.stop();
});

describe("--output-dir is claimed only once the coordinator accepted the request", () => {
  it("capture on an unknown device leaves no directory, and a retry with the right device uses the same path", async () => {
    const dir = out("capture-retry");
    const wrong = await farm(["evidence", "capture", "--device", "NO-SUCH-PHONE", "--output-dir", dir], lab.env);
    expect(wrong.code).toBe(66);
    expect(wrong.json).toMatchObject({ ok: false, code: "DEVICE_NOT_FOUND" });
    expect(existsSync(dir)).toBe(false);

    const right = await farm(["evidence", "capture", "--device", phone.serial, "--output-dir", dir], lab.env);
    expect(right.code).toBe(0);
    expect(right.json).toMatchObject({ ok: true, status: "complete", manifestPath: join(dir, "manifest.json") });
    expect((await farm(["evidence", "verify", dir], lab.env)).json).toMatchObject({ ok: true, checked: 3 });
  });

  it("pull of an unknown id leaves no directory, and a retry with a stored id uses the same path", async () => {
    const dir = out("pull-retry");
    const unknown = await farm(["evidence", "pull", "00000000-0000-4000-8000-000000000000", "--output-dir", dir], lab.env);
    expect(unknown.code).toBe(66);
    expect(unknown.json).toMatchObject({ ok: false, code: "EVIDENCE_NOT_FOUND" });
    expect(existsSync(dir)).toBe(false);

    const stored = await farm(["evidence", "capture", "--device", phone.serial], lab.env);
    expect(stored.json).toMatchObject({ ok: true, manifestPath: null });
    const id = String(stored.json["evidenceId"]);
    const pulled = await farm(["evidence", "pull", id, "--output-dir", dir], lab.env);
    expect(pulled.code).toBe(0);
    expect(pulled.json).toMatchObject({ ok: true, evidenceId: id, status: "complete" });
    expect((await manifestOf(dir)).evidenceId).toBe(id);
  });
});

describe("single-value flags", () => {
  it("refuses a flag given twice before touching the coordinator or the disk", async () => {
    const dir = out("dup-flag");
    const before = ((await farm(["evidence", "list"], lab.env)).json["bundles"] as unknown[]).length;
    const r = await farm(["evidence", "capture", "--device", phone.serial, "--device", "OTHER", "--output-dir", dir], lab.env);
    expect(r.code).toBe(64);
    expect(r.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "device" });
    expect(existsSync(dir)).toBe(false);
    expect(((await farm(["evidence", "list"], lab.env)).json["bundles"] as unknown[]).length).toBe(before);
    // --output is taken before the command's own flags, and held to the same rule.
    const output = await farm(["devices", "--output", "json", "--output", "pretty"], lab.env);
    expect(output.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "output" });
  });
});

describe("farm evidence video stop|status with a conflicting --device", () => {
  it("refuses before any stop is sent: the recording keeps running, and a correct stop completes it", async () => {
    // screenrecord writes frames only when the screen changes.
    animation = setInterval(() => phone.device.state.screen.changed(), 50);
    const bundle = out("video");
    const started = await farm(["evidence", "video", "start", "--device", phone.serial, "--duration-seconds", "30", "--size", "216x480", "--output-dir", bundle], lab.env);
    expect(started.code).toBe(0);
    expect(started.json).toMatchObject({ ok: true, status: "recording" });
    const id = String(started.json["sessionId"]);

    // By session id: nothing local says where it records, so the saved target is read first.
    for (const session of [id, bundle, join(bundle, "manifest.json")]) {
      const stop = await farm(["evidence", "video", "stop", "--session", session, "--device", "someone-else"], lab.env);
      expect(stop.code, session).toBe(64);
      expect(stop.json, session).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "device" });
      const status = await farm(["evidence", "video", "status", "--session", id], lab.env);
      expect(status.json, session).toMatchObject({ ok: true, status: "recording", sessionId: id });
    }
    const conflictingStatus = await farm(["evidence", "video", "status", "--session", id, "--device", "someone-else"], lab.env);
    expect(conflictingStatus.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "device" });
    // The same device spelled out is no conflict.
    const same = await farm(["evidence", "video", "status", "--session", id, "--device", phone.serial], lab.env);
    expect(same.json).toMatchObject({ ok: true, status: "recording" });

    await new Promise((r) => setTimeout(r, 1_500));
    // By the bundle's path, so the CLI also fills the directory with the finished bundle.
    const stopped = await farm(["evidence", "video", "stop", "--session", bundle, "--device", phone.serial], lab.env);
    expect(stopped.code).toBe(0);
    expect(stopped.json).toMatchObject({ ok: true, status: "complete", sessionId: id });
    const m = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8")) as Manifest & { video: { stopReason: string } };
    expect(m.status).toBe("complete");
    expect(m.video.stopReason).toBe("requested");
    // verify's content check on a real recording: it probes as recorded.
    expect((await farm(["evidence", "verify", bundle], lab.env)).json).toMatchObject({ ok: true });
    clearInterval(animation);
    animation = undefined;
  });
});

describe("a full disk under --output-dir", () => {
  it("is EVIDENCE_CAPTURE_FAILED naming the evidence, leaves no empty or cut file under a final name, and loses nothing stored", async (ctx) => {
    const mnt = join(lab.dir.path, "tiny");
    await mkdir(mnt);
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], { stdio: "pipe" });
    } catch (err) {
      ctx.skip(`cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): ${(err as Error).message.split("\n")[0]}`);
    }
    try {
      const dir = join(mnt, "bundle");
      const r = await farm(["evidence", "capture", "--device", phone.serial, "--output-dir", dir], lab.env);
      expect(r.code).toBe(69);
      expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED" });
      const id = String(r.json["evidenceId"]);
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      expect(String(r.json["message"])).toContain(id);

      // Nothing stored is lost: the same bundle pulls whole into a good directory.
      const good = out("after-full-disk");
      const pulled = await farm(["evidence", "pull", id, "--output-dir", good], lab.env);
      expect(pulled.json).toMatchObject({ ok: true, evidenceId: id, status: "complete" });
      expect((await farm(["evidence", "verify", good], lab.env)).json).toMatchObject({ ok: true, checked: 3 });
      const stored = await manifestOf(good);

      // What the full disk holds is only whole, verified artifacts: no manifest, no empty, cut or temporary file.
      const left = existsSync(dir) ? await readdir(dir) : [];
      expect(left).not.toContain("manifest.json");
      for (const name of left) {
        const a = stored.artifacts.find((x) => x.path === name);
        expect(a, `unexpected file ${name}`).toBeDefined();
        const bytes = readFileSync(join(dir, name));
        expect(bytes.length, name).toBe(a?.bytes);
        expect(sha(bytes), name).toBe(a?.sha256);
      }
      expect(left.length).toBeLessThan(stored.artifacts.length);
    } finally {
      execFileSync("umount", [mnt]);
    }
  });
});

describe("farm evidence verify judges content", () => {
  it("fails a complete screenshot that is text even when the manifest's size and sha256 match it", async () => {
    const dir = out("text-png");
    expect((await farm(["evidence", "capture", "--device", phone.serial, "--output-dir", dir], lab.env)).code).toBe(0);
    const text = Buffer.from("definitely not a PNG\n".repeat(100));
    await writeFile(join(dir, "screenshot.png"), text);
    const m = await manifestOf(dir);
    const shot = m.artifacts.find((a) => a.kind === "screenshot");
    expect(shot).toMatchObject({ status: "complete", path: "screenshot.png" });
    Object.assign(shot as object, { bytes: text.length, sha256: sha(text) });
    await writeFile(join(dir, "manifest.json"), JSON.stringify(m));

    const v = await farm(["evidence", "verify", dir], lab.env);
    expect(v.code).toBe(65);
    expect(v.json).toMatchObject({ ok: false, code: "EVIDENCE_VERIFY_FAILED" });
    const problems = v.json["problems"] as string[];
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^screenshot\.png: .*PNG/);
  });
});
