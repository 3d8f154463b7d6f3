import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connectionScope } from "@farm/client/connections";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { SessionStepSchema } from "@farm/shared/gen/farm/v1/session_service_pb";
import { afterEach, describe, expect, it } from "vitest";
import { CliError } from "../cli-error.js";
import { createPrinter, type OutputFormat } from "../output.js";
import type { Runtime } from "../tree/build.js";
import { describeTree } from "../tree/describe.js";
import { parseOnly } from "../tree/parse-for-test.js";
import { buildProgram } from "../tree/program.js";
import { scenarioFromSessionSteps } from "./session-explain.js";

const fixtures = fileURLToPath(new URL("../../../test/fixtures/session-policy/", import.meta.url));
const POLICY = join(fixtures, "checkout.policy.yaml");
const STEPS = join(fixtures, "checkout.steps.yaml");
const NO_CONFIG = { FARM_CONFIG: "/nonexistent/farm/config.json" };

/** Runs `farm ARGV` in-process with no server, as main.ts would, collecting what it prints. */
const removeAfter: string[] = [];
afterEach(() => {
  for (const dir of removeAfter.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function farm(argv: string[], format: OutputFormat = "pretty", env: NodeJS.ProcessEnv = NO_CONFIG): Promise<{ out: string; exitCode?: number; error?: CliError }> {
  let out = "";
  const rt: Runtime = {
    env,
    printer: createPrinter(format, (s) => (out += s), (s) => (out += s)),
    format,
    stopSignal: new AbortController().signal,
    commandTree: describeTree,
    connections: connectionScope(),
    writeOut: (s) => (out += s),
    writeErr: (s) => (out += s),
  };
  try {
    await buildProgram(rt, async () => 0).parseAsync(argv, { from: "user" });
    return { out, ...(rt.exitCode !== undefined ? { exitCode: rt.exitCode } : {}) };
  } catch (error) {
    if (error instanceof CliError) return { out, error };
    throw error;
  }
}

describe("farm session explain", () => {
  it("is a leaf of farm session taking --policy, --steps and --session", async () => {
    const r = await parseOnly(["session", "explain", "--policy", POLICY, "--steps", STEPS]);
    expect(r.parsed?.path).toBe("farm session explain");
    expect(r.parsed?.opts).toMatchObject({ policy: POLICY, steps: STEPS });
    expect((await parseOnly(["session", "explain", "--steps", STEPS])).error).toMatchObject({ code: "INVALID_ARGUMENT", field: "policy" });
  });

  it("prints a row per rule, the warnings and the totals for the fixture, and exits 0", async () => {
    const r = await farm(["session", "explain", "--policy", POLICY, "--steps", STEPS]);
    expect(r.error).toBeUndefined();
    expect(r.exitCode).toBe(0);
    const lines = r.out.split("\n");
    expect(lines[0]).toBe(`policy ${POLICY} over 60 steps (steps file ${STEPS})`);
    const row = (rule: string) => lines.find((l) => l.startsWith(`${rule} `))?.split(/\s{2,}/);
    expect(row("default")).toEqual(["default", "every step", "screenshot.before", "60", "1-60", "0 B"]);
    expect(row("rule 1")?.slice(0, 4)).toEqual(["rule 1", "action: tap, idMatches: \"*:id/checkout*\"", "deviceLog.around, elements.after", "24"]);
    expect(row("rule 3")).toEqual(["rule 3", "result: error (speculative)", "deviceLog.around, video.around", "3", "18,38,59", "6.2 MiB"]);
    expect(row("rule 6")?.[3]).toBe("0");
    expect(lines.filter((l) => l.startsWith("⚠ "))).toEqual([
      "⚠ rule 1 (action: tap, idMatches: \"*:id/checkout*\") captures deviceLog on 24 of 60 steps (more than a third): ≈ 1.5 MiB",
      "⚠ rule 3 (result: error) must start deviceLog and video speculatively around all 60 steps (more than 50) to keep the 3 it fires on: ≈ 6.2 MiB kept",
    ]);
    expect(r.out).toContain("note: CI_API_TOKEN is not set in this environment");
    expect(row("video")).toEqual(["video", "9", "18 MiB", "51"]);
    expect(row("total")).toEqual(["total", "39 MiB"]);
  });

  it("gives the same as JSON with -o json", async () => {
    const r = await farm(["session", "explain", "--policy", POLICY, "--steps", STEPS], "json", { ...NO_CONFIG, CI_API_TOKEN: "set" });
    const j = JSON.parse(r.out) as Record<string, unknown> & { rules: { rule: string; fires: number; sequences: number[] }[]; warnings: { rule: string }[]; notes: unknown[]; totals: { kind: string; captures: number }[] };
    expect(j).toMatchObject({ ok: true, steps: 60, scenario: { source: "steps", file: STEPS }, policy: { file: POLICY, secrets: ["CI_API_TOKEN"] } });
    expect(j.rules.map((x) => x.fires)).toEqual([60, 24, 40, 3, 6, 6, 0]);
    expect(j.rules[3]?.sequences).toEqual([18, 38, 59]);
    expect(j.warnings.map((w) => w.rule)).toEqual(["rule 1", "rule 3"]);
    expect(j.notes).toHaveLength(1); // the long press; the secret is set
    expect(j.totals.map((t) => [t.kind, t.captures])).toEqual([["screenshot", 120], ["elements", 48], ["video", 9], ["deviceLog", 25]]);
  });

  it("refuses an invalid policy, listing every problem with its path", async () => {
    const dir = mkdtempSync(join(tmpdir(), "farm-explain-"));
    removeAfter.push(dir);
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, "capture: [video.before]\ncapturePolicy:\n  - on: {event: screenChanged, idMatches: '*'}\n    capture: [elements]\nsecret: [X]\n");
    const r = await farm(["session", "explain", "--policy", bad, "--steps", STEPS]);
    expect(r.error).toMatchObject({ code: "INVALID_ARGUMENT", field: "policy" });
    expect(r.error?.message.split("\n")).toEqual([
      `--policy ${bad} is not a valid session policy (3 problems):`,
      expect.stringMatching(/^ {2}secret: unknown key/),
      expect.stringMatching(/^ {2}capture\[0\]: "video\.before" is not a capture token/),
      "  capturePolicy[0].on.idMatches: idMatches is allowed only with action (rule 1)",
    ]);
    const missing = await farm(["session", "explain", "--policy", join(dir, "none.yaml"), "--steps", STEPS]);
    expect(missing.error).toMatchObject({ code: "INVALID_ARGUMENT", field: "policy" });
    writeFileSync(join(dir, "steps.json"), "[{\"action\": \"tapp\"}]");
    const steps = await farm(["session", "explain", "--policy", POLICY, "--steps", join(dir, "steps.json")]);
    expect(steps.error?.message).toContain("steps[0].action: \"tapp\" is not one of");
  });

  it("wants exactly one scenario: --steps wins over FARM_SESSION from the environment", async () => {
    expect((await farm(["session", "explain", "--policy", POLICY])).error).toMatchObject({ code: "INVALID_ARGUMENT", field: "steps" });
    expect((await farm(["session", "explain", "--policy", POLICY, "--steps", STEPS, "--session", "s-1"])).error?.message).toContain("not both");
    const r = await farm(["session", "explain", "--policy", POLICY, "--steps", STEPS], "json", { ...NO_CONFIG, FARM_SESSION: "s-1" });
    expect(JSON.parse(r.out)).toMatchObject({ scenario: { source: "steps" } });
  });
});

describe("recorded steps as a scenario", () => {
  const png = (sha: string) => ({ sha256: sha.repeat(64), width: 1, height: 1 });

  it("takes the selector's id, else the resolved element's; failed when not ok; screenChanged when the screenshots differ", () => {
    const steps = [
      create(SessionStepSchema, { sequence: 1, action: "tap", arguments: { tap: { element: { resourceId: "a:id/checkout" } } }, result: { ok: true }, before: png("a"), after: png("b") }),
      create(SessionStepSchema, {
        sequence: 2,
        action: "tap",
        arguments: { tap: { element: { text: "Pay" } } },
        result: { ok: false, errorCode: "DEVICE_OFFLINE", response: { element: { element: { resourceId: "a:id/pay" }, x: 1, y: 2 } } },
        before: png("a"),
        after: png("a"),
      }),
      create(SessionStepSchema, { sequence: 3, action: "tap", arguments: { tap: { x: 5, y: 6 } }, result: { ok: true }, before: png("a") }),
      create(SessionStepSchema, { sequence: 7, action: "shell", arguments: { command: "id" }, before: { errorCode: "DEVICE_OFFLINE" }, after: png("c") }),
    ];
    expect(scenarioFromSessionSteps(steps)).toEqual([
      { sequence: 1, action: "tap", targetId: "a:id/checkout", screenChanged: true, failed: false },
      { sequence: 2, action: "tap", targetId: "a:id/pay", screenChanged: false, failed: true },
      { sequence: 3, action: "tap", targetId: "", screenChanged: false, failed: false },
      // No result recorded reads as failed; a failed capture leaves screenChanged unknown (false).
      { sequence: 7, action: "shell", targetId: "", screenChanged: false, failed: true },
    ]);
  });
});
