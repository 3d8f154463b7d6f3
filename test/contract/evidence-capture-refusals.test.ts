/**
 * `farm evidence capture`'s argument matrix: every bad argument is refused
 * with its code and field, in the pre-dispatch envelope, before anything
 * reaches a phone or the disk. The CLI runs in process (main) against a real
 * coordinator and an in-process agent whose services only count calls; the
 * e2e smoke (test/e2e/evidence.test.ts) keeps one refusal through the real
 * processes and adb.
 */
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exitCodeFor } from "@farm/shared/error-codes";
import { startCountingFarm, type CountingFarm } from "../support/counting-farm.js";

const SERIAL = "EVIDENCE01";
let farm: CountingFarm;
const out = (name: string) => join(farm.dir, "out", name);
const bundles = async () => ((await farm.cli(["evidence", "list"])).json["bundles"] as unknown[]).length;

beforeAll(async () => {
  farm = await startCountingFarm("capture-refusals", [{ serial: SERIAL }]);
  await mkdir(out("exists"));
  await writeFile(out("a-file"), "x");
});

afterAll(async () => {
  await farm?.stop();
});

describe("farm evidence capture refuses bad arguments", () => {
  const cases: [string, () => string[], string, string][] = [
    ["a relative --output-dir whose parent is not in the working directory", () => ["--output-dir", "relative/dir"], "INVALID_ARGUMENT", "output-dir"],
    ["a blank --output-dir", () => ["--output-dir", "   "], "INVALID_ARGUMENT", "output-dir"],
    ["--output-dir /", () => ["--output-dir", "/"], "INVALID_ARGUMENT", "output-dir"],
    ["an --output-dir with ..", () => ["--output-dir", `${out("x")}/../y`], "INVALID_ARGUMENT", "output-dir"],
    ["an --output-dir that exists", () => ["--output-dir", out("exists")], "EVIDENCE_OUTPUT_EXISTS", "output-dir"],
    ["an --output-dir without a parent", () => ["--output-dir", join(out("no-parent"), "child")], "INVALID_ARGUMENT", "output-dir"],
    ["an --output-dir under a file", () => ["--output-dir", join(out("a-file"), "child")], "INVALID_ARGUMENT", "output-dir"],
    ["a label of 2049 characters", () => ["--label", "x".repeat(2049)], "INVALID_ARGUMENT", "label"],
    ["a label of 2049 UTF-16 code units", () => ["--label", "\u{1F600}".repeat(1024) + "x"], "INVALID_ARGUMENT", "label"],
    ["a context that is an array", () => ["--context-json", "[1,2]"], "INVALID_ARGUMENT", "context-json"],
    ["a context that is null", () => ["--context-json", "null"], "INVALID_ARGUMENT", "context-json"],
    ["a context that is not JSON", () => ["--context-json", "{nope"], "INVALID_ARGUMENT", "context-json"],
    ["a context that is a string", () => ["--context-json", "\"text\""], "INVALID_ARGUMENT", "context-json"],
    // 8192 two-byte characters: one object over 16 KiB.
    ["a context over 16 KiB", () => ["--context-json", JSON.stringify({ k: "é".repeat(8192) })], "INVALID_ARGUMENT", "context-json"],
    ["--timeout below 1000", () => ["--timeout", "999"], "INVALID_ARGUMENT", "timeout"],
    ["--timeout above 120000", () => ["--timeout", "120001"], "INVALID_ARGUMENT", "timeout"],
    ["a fractional --timeout", () => ["--timeout", "1500.5"], "INVALID_ARGUMENT", "timeout"],
    ["a --timeout that is not a number", () => ["--timeout", "soon"], "INVALID_ARGUMENT", "timeout"],
    ["an --app-package that is not a package", () => ["--app-package", "not a package"], "INVALID_ARGUMENT", "app-package"],
  ];

  it.each(cases)("%s: %s on its field, nothing reaches the phone, nothing is written", async (_name, args, code, field) => {
    const files = await farm.files();
    const listed = await bundles();
    const r = await farm.cli(["evidence", "capture", "--device", SERIAL, ...args()]);
    expect(r.exitCode).toBe(exitCodeFor(code));
    expect(r.json).toMatchObject({ ok: false, code, field, dispatched: false, ambiguous: false });
    expect(farm.reached).toEqual([]);
    expect(await farm.files()).toEqual(files);
    expect(await bundles()).toBe(listed);
  });

  it("refuses a capture without --device, before the output dir is made", async () => {
    const files = await farm.files();
    const r = await farm.cli(["evidence", "capture", "--output-dir", out("no-device")]);
    expect(r.exitCode).toBe(64);
    expect(r.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "device", dispatched: false, ambiguous: false });
    expect(farm.reached).toEqual([]);
    expect(await farm.files()).toEqual(files);
    expect(await readdir(out("exists"))).toEqual([]);
  });

  // Last: the control that the counter counts. A good capture reaches the agent.
  it("lets a good capture through to the agent", async () => {
    await farm.cli(["evidence", "capture", "--device", SERIAL, "--output-dir", out("good")]);
    expect(farm.reached).toEqual([`farm.v1.EvidenceService/CaptureEvidence ${SERIAL}`]);
  });
});
