/**
 * `farm lease run`'s summary for CI: a JSON document after the command
 * exits, on stdout with -o json and in the file --summary names, while the
 * CLI still exits with the command's own code.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm, farmBin, farmProcess, runCli } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let serial: string;
let model: string;

beforeAll(async () => {
  lab = await startLab("lease-run-summary");
  serial = (await lab.addDevice({ serialno: "SUMMARY01" })).serial;
  const shown = await farm(["device", "show", serial], lab.env);
  model = (shown.json["devices"] as { properties: { model: string } }[])[0]?.properties.model ?? "";
  expect(model).not.toBe("");
}, 180_000);

afterAll(async () => {
  await lab?.stop();
});

interface Summary {
  ok: boolean;
  leaseId: string;
  phone: { serial: string; physicalId: string; model: string | null };
  sessionId: string | null;
  sessionStatus: string | null;
  steps: number | null;
  failedSteps: { sequence: number; action: string; errorCode: string }[] | null;
  exitCode: number;
  exportPath: string | null;
}

/** The child: one tap that works, one that finds no element (a failed step), then the given exit code. */
const steps = (exit: number) => [
  "sh",
  "-c",
  `"${process.execPath}" "${farmBin}" input tap 10 20 >/dev/null && "${process.execPath}" "${farmBin}" input tap --text "No such button" >/dev/null; exit ${exit}`,
];

describe("farm lease run summary", () => {
  it("-o json: printed on stdout after a passing command, the CLI exits 0", async () => {
    const r = await farmProcess(["lease", "run", "--device", serial, "-o", "json", "--", "true"], lab.env);
    expect(r.code, r.stderr).toBe(0);
    const s = r.json as unknown as Summary;
    expect(s).toMatchObject({ ok: true, exitCode: 0, sessionId: null, sessionStatus: null, steps: null, failedSteps: null, exportPath: null });
    expect(s.phone).toMatchObject({ serial, model });
    expect(s.phone.physicalId).toMatch(/^pd-/);
    expect(s.leaseId).not.toBe("");
    // The people's lines stay on stderr.
    expect(r.stderr).toContain("farm lease run: leased");
    // The lease was released on the way out.
    const list = await farm(["lease", "list"], lab.env);
    expect((list.json["leases"] as { leaseId: string }[]).map((l) => l.leaseId)).not.toContain(s.leaseId);
  }, 120_000);

  it("no format asked for, stdout a pipe (JSON by default): stdout is the command's output alone", async () => {
    const r = await farmProcess(["lease", "run", "--device", serial, "--", "echo", "the command's own line"], { ...lab.env, FARM_OUTPUT: "" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("the command's own line\n");
  }, 120_000);

  it("-o json with --session: steps and failed steps from the session, the failing command's code kept", async () => {
    const r = await farmProcess(["lease", "run", "--device", serial, "--session", "-o", "json", "--", ...steps(3)], lab.env);
    expect(r.code, r.stderr).toBe(3);
    const s = r.json as unknown as Summary;
    expect(s).toMatchObject({ ok: false, exitCode: 3, sessionStatus: "failed", steps: 2 });
    expect(s.failedSteps).toEqual([expect.objectContaining({ sequence: 2, action: "tap", errorCode: "ELEMENT_NOT_FOUND" })]);
    // The same session as farm records it.
    const shown = await farm(["session", "show", String(s.sessionId)], lab.env);
    expect(shown.json["session"]).toMatchObject({ sessionId: s.sessionId, stepCount: 2, failedStepCount: 1 });
  }, 120_000);

  it("--summary FILE (relative to the working directory) in pretty output: written there, stdout left to the command", async () => {
    const args = ["lease", "run", "--device", serial, "--session", "--summary", "summary.json", "--export", "exported", "-o", "pretty", "--", ...steps(0)];
    const r = await runCli("sh", ["-c", `cd "${lab.dir.path}" && exec "$0" "$@"`, process.execPath, farmBin, ...args], { ...process.env, ...lab.env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/farm lease run: pd-\S+ \(.+\) exit 0, session \S+ passed, 2 steps, 1 failed/);
    const s = JSON.parse(await readFile(join(lab.dir.path, "summary.json"), "utf8")) as Summary;
    expect(s).toMatchObject({ ok: true, exitCode: 0, sessionStatus: "passed", steps: 2, phone: { serial, model } });
    expect(s.failedSteps?.map((f) => f.errorCode)).toEqual(["ELEMENT_NOT_FOUND"]);
    // --export (relative, like --summary): the session's export, which verifies.
    expect(s.exportPath).toBe(join(lab.dir.path, "exported", "manifest.json"));
    const verified = await farm(["evidence", "verify", join(lab.dir.path, "exported")], lab.env);
    expect(verified.code, verified.stdout).toBe(0);
  }, 120_000);

  it("--export without --session, or to a directory that exists, is refused before a device is leased", async () => {
    const alone = await farmProcess(["lease", "run", "--device", serial, "--export", join(lab.dir.path, "x"), "--", "true"], lab.env);
    expect(alone.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "export" });
    const taken = await farmProcess(["lease", "run", "--device", serial, "--session", "--export", lab.dir.path, "--", "true"], lab.env);
    expect(taken.json).toMatchObject({ ok: false, code: "EVIDENCE_OUTPUT_EXISTS", field: "export" });
    expect(taken.code).toBe(73);
    expect(taken.stderr).not.toContain("leased");
  }, 60_000);

  it("--summary in a directory that does not exist is refused before a device is leased", async () => {
    const r = await farmProcess(["lease", "run", "--device", serial, "--summary", join(lab.dir.path, "no-such-dir", "s.json"), "--", "true"], lab.env);
    expect(r.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "summary" });
    expect(r.code).toBe(64);
    expect(r.stderr).not.toContain("leased");
  }, 60_000);
});
