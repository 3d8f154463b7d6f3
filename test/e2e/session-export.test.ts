/**
 * A recorded session's timeline end to end: actions with FARM_SESSION set,
 * `farm session show` listing them with their screenshots, `farm session
 * export` writing them out, `farm evidence verify` checking the export.
 * `farm standalone` as its own process, a real adb server, a simulated
 * phone, the real CLI.
 */
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimDevice } from "../devsim/index.js";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";
import type { SessionExportFile } from "@farm/cli/session-export-verify";

let lab: Lab;
let serial: string;
let phone: SimDevice;

interface StepImageJson {
  sha256?: string;
  width?: number;
  height?: number;
  size?: string;
  errorCode?: string;
  evidenceId?: string;
  path?: string;
  file?: string;
}
interface StepJson {
  sequence: number;
  recordVersion: number;
  action: string;
  description: string;
  result: { ok?: boolean; errorCode?: string; exitCode?: number };
  before?: StepImageJson;
  after?: StepImageJson;
  durationMs?: number;
  ocr?: { status: string; observations?: unknown[] };
}

const out = (name: string) => join(lab.dir.path, "out", name);

beforeAll(async () => {
  lab = await startLab("session-export");
  await mkdir(join(lab.dir.path, "out"));
  ({ serial, device: phone } = await lab.addDevice({ serialno: "SESSEXP01" }));
  // Screenshots are compared across steps: a minute turning over in the status bar between two would differ.
  phone.state.renderer.clock = () => new Date(Date.UTC(2026, 0, 1, 12, 0));
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("session timeline and export", () => {
  let sessionId = "";
  let steps: StepJson[] = [];
  let stillId = "";

  it("records each action with FARM_SESSION as a step, shown in order with its screenshots", async () => {
    const lease = await farm(["lease", "acquire", "--device", serial], lab.env);
    expect(lease.code, lease.stderr).toBe(0);
    const token = (lease.json["lease"] as { token: string }).token;
    const started = await farm(["session", "start", "--device", serial, "--name", "export-me", "--ocr"], { ...lab.env, FARM_LEASE: token });
    expect(started.code, started.stderr).toBe(0);
    sessionId = (started.json["session"] as { sessionId: string }).sessionId;
    const env = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: serial, FARM_SESSION: sessionId };

    const tap = await farm(["input", "tap", "100", "200"], env);
    expect(tap.code, tap.stdout + tap.stderr).toBe(0);
    const shell = await farm(["shell", "--", "echo", "hello"], env);
    expect(shell.code, shell.stdout + shell.stderr).toBe(0);
    const key = await farm(["input", "key", "KEYCODE_HOME"], env);
    expect(key.code, key.stdout + key.stderr).toBe(0);
    // A failed action is a step too.
    const missing = await farm(["input", "tap", "--text", "No such button anywhere"], env);
    expect(missing.json).toMatchObject({ ok: false, code: "ELEMENT_NOT_FOUND" });
    // Screenshots that cannot be taken leave the step without them, recorded as failed captures.
    phone.faults.set({ png: "truncated" });
    try {
      const blind = await farm(["shell", "--", "true"], env);
      expect(blind.code, blind.stdout + blind.stderr).toBe(0);
    } finally {
      phone.faults.set({ png: null });
    }
    // A still capture in the session is attached as a (version 1) step.
    const still = await farm(["evidence", "capture", "--device", serial], env);
    expect(still.code, still.stdout + still.stderr).toBe(0);
    stillId = String(still.json["evidenceId"]);

    const shown = await farm(["session", "show", sessionId, "--output", "json"], lab.env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.json["session"]).toMatchObject({ sessionId, name: "export-me", stepCount: 6, failedStepCount: 1 });
    steps = shown.json["steps"] as StepJson[];
    expect(steps.map((s) => s.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(steps.map((s) => s.action)).toEqual(["tap", "shell", "key", "tap", "shell", "evidence"]);
    expect(steps.map((s) => s.result.ok === true)).toEqual([true, true, true, false, true, true]);
    expect(steps[1]?.result.exitCode ?? 0).toBe(0);
    expect(steps[3]?.result.errorCode).toBe("ELEMENT_NOT_FOUND");
    for (const s of steps.slice(0, 3)) {
      expect(s.recordVersion).toBe(2);
      expect(s.before?.sha256, JSON.stringify(s)).toMatch(/^[0-9a-f]{64}$/);
      expect(s.after?.sha256, JSON.stringify(s)).toMatch(/^[0-9a-f]{64}$/);
    }
    // One step's after is the next one's before: nothing changed the screen between them.
    expect(steps[1]?.before?.sha256).toBe(steps[0]?.after?.sha256);
    // The capture that failed is recorded as such, with no screenshot.
    expect(steps[4]?.before).toMatchObject({ errorCode: "SCREENSHOT_INVALID_PNG" });
    expect(steps[4]?.before?.sha256).toBeUndefined();
    expect(steps[4]?.after?.errorCode).toBe("SCREENSHOT_INVALID_PNG");
    // OCR runs on each before screenshot, in the background.
    for (const s of steps.slice(0, 4)) expect(["pending", "done"]).toContain(s.ocr?.status);
    expect(steps[4]?.ocr?.status).toBe("skipped");
    expect(steps[5]).toMatchObject({ recordVersion: 1, after: { evidenceId: stillId, path: "screenshot.png" } });

    // Pretty: one line per step.
    const pretty = await farm(["session", "show", sessionId], { ...lab.env, FARM_OUTPUT: "pretty" });
    expect(pretty.code, pretty.stderr).toBe(0);
    const lines = pretty.stdout.split("\n").filter((l) => /^\s+#\d/.test(l));
    expect(lines).toHaveLength(6);
    expect(lines[0]).toMatch(new RegExp(`#1\\s+tap\\s+.*→ ok\\s+\\(\\d+ ms\\)\\s+before:${steps[0]?.before?.sha256?.slice(0, 8)}\\s+after:${steps[0]?.after?.sha256?.slice(0, 8)}`));
    expect(lines[3]).toMatch(/#4\s+tap\s+.*→ ELEMENT_NOT_FOUND: /);
    expect(lines[4]).toMatch(/before:failed\(SCREENSHOT_INVALID_PNG\)\s+after:failed\(SCREENSHOT_INVALID_PNG\)\s+ocr:skipped$/);
    expect(lines[5]).toMatch(new RegExp(`#6\\s+evidence\\s+.*before:–\\s+after:evidence:${stillId}/screenshot\\.png`));
    // The bundle's id as the timeline shows it is one `farm evidence pull` takes.
    const shownId = /after:evidence:([^/\s]+)\//.exec(lines[5] ?? "")?.[1] ?? "";
    const pulled = await farm(["evidence", "pull", shownId, join(lab.dir.path, "pasted-still")], lab.env);
    expect(pulled.json, pulled.stderr).toMatchObject({ ok: true, evidenceId: stillId });

    const ended = await farm(["session", "end"], env);
    expect(ended.code, ended.stderr).toBe(0);
    // Twelve CLI processes, each waiting on its answer: on a loaded machine that outlasts the default minute.
  }, 180_000);

  it("exports the timeline and every screenshot; farm evidence verify accepts it and catches a changed image", async () => {
    expect(sessionId).not.toBe("");
    // An unknown session creates nothing.
    const none = await farm(["session", "export", "no-such-session", out("none")], lab.env);
    expect(none.json).toMatchObject({ ok: false, code: "SESSION_NOT_FOUND" });
    expect(existsSync(out("none"))).toBe(false);

    const dir = out("export");
    const r = await farm(["session", "export", sessionId, dir], lab.env);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.json).toMatchObject({ ok: true, sessionId, outputDir: dir, manifestPath: join(dir, "manifest.json"), steps: 6, status: "passed", failedCaptures: 2 });
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    expect((await stat(join(dir, "images"))).mode & 0o777).toBe(0o700);

    const manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as { kind: string; schemaVersion: number; sessionId: string; files: SessionExportFile[] };
    expect(manifest).toMatchObject({ kind: "farm-session-export", schemaVersion: 1, sessionId });
    const shas = new Set(steps.flatMap((s) => [s.before?.sha256, s.after?.sha256]).filter((x): x is string => !!x));
    const legacy = `images/evidence-${stillId}-screenshot.png`;
    expect(manifest.files.map((f) => f.path).sort()).toEqual([...[...shas].map((s) => `images/${s}.png`), legacy, "timeline.json"].sort());
    expect((await readdir(join(dir, "images"))).sort()).toEqual([...[...shas].map((s) => `${s}.png`), `evidence-${stillId}-screenshot.png`].sort());
    for (const f of manifest.files) {
      expect((await stat(join(dir, f.path))).mode & 0o777).toBe(0o600);
      if (f.mimeType === "image/png") {
        const meta = await sharp(join(dir, f.path)).metadata();
        expect([meta.width, meta.height]).toEqual([f.width, f.height]);
      }
    }
    expect(manifest.files.find((f) => f.path === legacy)?.mimeType).toBe("image/png");

    const timeline = JSON.parse(await readFile(join(dir, "timeline.json"), "utf8")) as { sessionId: string; session: { sessionId: string }; steps: StepJson[] };
    expect(timeline.session.sessionId).toBe(sessionId);
    expect(timeline.steps.map((s) => s.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(timeline.steps[0]?.before?.file).toBe(`images/${steps[0]?.before?.sha256}.png`);
    expect(timeline.steps[5]?.after).toMatchObject({ evidenceId: stillId, file: legacy });
    // A failed capture stays in the timeline as one, without a file.
    expect(timeline.steps[4]?.before).toMatchObject({ errorCode: "SCREENSHOT_INVALID_PNG" });
    expect(timeline.steps[4]?.before?.file).toBeUndefined();

    const ok = await farm(["evidence", "verify", dir], lab.env);
    expect(ok.code, ok.stdout).toBe(0);
    expect(ok.json).toMatchObject({ ok: true, evidenceId: sessionId, status: "complete", checked: manifest.files.length });

    // The same export with --output-dir; a directory that exists is refused.
    const again = await farm(["session", "export", sessionId, "--output-dir", out("export-2")], lab.env);
    expect(again.code, again.stdout).toBe(0);
    const taken = await farm(["session", "export", sessionId, dir], lab.env);
    expect(taken.json).toMatchObject({ ok: false, code: "EVIDENCE_OUTPUT_EXISTS" });

    // One changed byte in one screenshot.
    const victim = join(dir, `images/${steps[0]?.before?.sha256}.png`);
    const bytes = await readFile(victim);
    bytes[bytes.length - 30] = (bytes[bytes.length - 30] as number) ^ 0x01;
    await writeFile(victim, bytes);
    const bad = await farm(["evidence", "verify", dir], lab.env);
    expect(bad.code).toBe(65);
    expect(bad.json).toMatchObject({ ok: false, code: "EVIDENCE_VERIFY_FAILED", evidenceId: sessionId });
    expect((bad.json["problems"] as string[]).join("\n")).toMatch(/sha256/);
  });

  it("fails, leaving no directory, when a screenshot arrives other than its sha256 says", async () => {
    expect(sessionId).not.toBe("");
    const sha = steps[0]?.before?.sha256 as string;
    // The coordinator's copy changes under it (disk rot, a bad restore).
    const stored = join(String(lab.standalone.ready["dataDir"]), "coordinator", "session-images", sha.slice(0, 2), `${sha}.png`);
    const original = await readFile(stored);
    const rotten = Buffer.from(original);
    rotten[rotten.length - 30] = (rotten[rotten.length - 30] as number) ^ 0x01;
    await writeFile(stored, rotten);
    try {
      const dir = out("rotten");
      const r = await farm(["session", "export", sessionId, dir], lab.env);
      expect(r.code).toBe(69);
      expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_TRANSFER_FAILED" });
      expect(String(r.json["message"])).toContain(sha);
      expect(existsSync(dir)).toBe(false);
    } finally {
      await writeFile(stored, original);
    }
  });

  it("verifies an export of a session still running as running, not complete; its client steps export their screenshots", async () => {
    const { serial: other } = await lab.addDevice({ serialno: "SESSEXP02" });
    const lease = await farm(["lease", "acquire", "--device", other], lab.env);
    expect(lease.code, lease.stderr).toBe(0);
    const token = (lease.json["lease"] as { token: string }).token;
    const started = await farm(["session", "start", "--device", other], { ...lab.env, FARM_LEASE: token });
    expect(started.code, started.stderr).toBe(0);
    const id = (started.json["session"] as { sessionId: string }).sessionId;
    const env = { ...lab.env, FARM_LEASE: token, FARM_DEVICE: other, FARM_SESSION: id };
    expect((await farm(["input", "key", "KEYCODE_HOME"], env)).code).toBe(0);
    const waited = await farm(["wait", "--text", "Settings", "--timeout", "10s"], env);
    expect(waited.code, waited.stdout + waited.stderr).toBe(0);

    const early = out("running");
    const r = await farm(["session", "export", id, early], lab.env);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.json).toMatchObject({ status: "running", steps: 2 });
    const timeline = JSON.parse(await readFile(join(early, "timeline.json"), "utf8")) as { steps: StepJson[] };
    // The wait, a client step, has its screenshots in the export like the routed key press.
    for (const side of ["before", "after"] as const) {
      expect(timeline.steps[1]?.[side]?.file, side).toMatch(/^images\/[0-9a-f]{64}\.png$/);
      expect(existsSync(join(early, String(timeline.steps[1]?.[side]?.file)))).toBe(true);
    }
    const running = await farm(["evidence", "verify", early], lab.env);
    expect(running.code, running.stdout).toBe(0);
    expect(running.json).toMatchObject({ ok: true, evidenceId: id, status: "running" });
    const pretty = await farm(["evidence", "verify", early], { ...lab.env, FARM_OUTPUT: "pretty" });
    expect(pretty.stdout).toMatch(/still running when exported \(status: running\)/);

    expect((await farm(["session", "end"], env)).code).toBe(0);
    const final = out("ended");
    expect((await farm(["session", "export", id, final], lab.env)).code).toBe(0);
    expect((await farm(["evidence", "verify", final], lab.env)).json).toMatchObject({ ok: true, status: "complete" });
  }, 120_000);
});
