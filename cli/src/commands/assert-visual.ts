import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { clientSession } from "../session.js";
import type { assertVisualOptions } from "../tree/check-commands.js";
import type { Action } from "../tree/spec.js";
import { clipMasks, compareImages, decodePng, encodePng, pctText, sha256Hex, type CompareResult } from "../visual/compare.js";
import { writeVisualFiles } from "../visual/output-files.js";
import { openSessionRecorder, recordStep, takeStepShot, type Recorded, type StepFile } from "../visual/session-step.js";
import { asCli, deviceTarget } from "./device-target.js";
import { libraryClient } from "./library-client.js";

/** Baselines are screenshots: a few MiB. */
const MAX_BASELINE_BYTES = 64 * 1024 * 1024;

/** What the step, --output json and the pretty line report: the check's numbers. */
function responseOf(r: CompareResult, engine: string, thresholdPct: number): JsonObject {
  return {
    diffPct: r.diffPct,
    engine,
    thresholdPct,
    width: r.width,
    height: r.height,
    differentPixels: r.differentPixels,
    comparedPixels: r.comparedPixels,
    maskedPixels: r.maskedPixels,
    ...(r.sizeMismatch ? { sizeMismatch: r.sizeMismatch as unknown as JsonObject } : {}),
  };
}

function failureText(r: CompareResult, name: string, thresholdPct: number): string {
  if (r.sizeMismatch) {
    const { baseline: b, actual: a } = r.sizeMismatch;
    return `the screen is ${a.width}x${a.height}, the baseline ${name} ${b.width}x${b.height}: nothing compared`;
  }
  return `the screen differs from ${name}: ${r.differentPixels} of ${r.comparedPixels} pixels (${pctText(r.diffPct)}) differ, more than the threshold ${pctText(thresholdPct)}`;
}

/**
 * `farm assert visual`: the device's screen against a baseline PNG. Every
 * flag is checked (the baseline read and decoded, the masks placed on it)
 * before the device is asked for anything.
 */
export const assertVisual: Action<typeof assertVisualOptions> = async (input) => {
  const { opts, ctx } = input;
  const { engine, threshold: thresholdPct } = opts;
  const target = deviceTarget({ ...opts, requestId: undefined });
  const baselinePath = opts.baseline;
  const name = basename(baselinePath);
  let baselineBytes: Buffer;
  try {
    baselineBytes = await readFile(baselinePath);
  } catch (err) {
    throw new CliError(Errors.INVALID_ARGUMENT, `cannot read --baseline ${baselinePath}: ${(err as Error).message}`, "baseline");
  }
  if (baselineBytes.length > MAX_BASELINE_BYTES) throw new CliError(Errors.INVALID_ARGUMENT, `--baseline ${baselinePath} is ${baselineBytes.length} bytes: not a screenshot`, "baseline");
  const baseline = await decodePng(baselineBytes, `--baseline ${baselinePath}`, "baseline");
  const masks = clipMasks(opts.mask, baseline.width, baseline.height);
  const baselineSha = sha256Hex(baselineBytes);

  const session = clientSession(input);
  const farm = libraryClient(session);
  // No session header: a screenshot is not a step; the check is one, appended below.
  const device = farm.device(target.serial, { lease: opts.lease || undefined, agent: target.agent });
  const recorder = await openSessionRecorder(ctx.env, farm, target.serial, session.timeoutMs);
  const startMs = Date.now();
  const t0 = performance.now();

  const shotAt = Date.now();
  const { png: actualBytes, sha256: actualSha } = await asCli(device.screenshot({ timeoutMs: session.timeoutMs }));
  let actual;
  try {
    actual = await decodePng(actualBytes, "the screenshot", "screenshot");
  } catch (err) {
    throw new CliError(Errors.SCREENSHOT_INVALID_PNG, (err as Error).message);
  }
  const result = compareImages(baseline, actual, { engine, masks, thresholdPct });
  const diffPng = result.diff ? await encodePng(result.diff) : undefined;
  const durationMs = performance.now() - t0;

  // Files only where the caller said (--output-dir), owner-only. Without it nothing is written: a session keeps
  // the diff (uploaded from memory), and no copy of the screen is left in a shared temporary directory.
  const stem = name.replace(/\.png$/i, "") || "baseline";
  const files = opts.outputDir ? await writeVisualFiles(opts.outputDir, stem, actualBytes, diffPng) : undefined;
  const actualFile = files?.actualFile;
  const diffFile = files?.diffFile;

  const response = responseOf(result, engine, thresholdPct);
  let recorded: Recorded | undefined;
  if (recorder) {
    const files: StepFile[] = [
      { name: "baseline.png", kind: "visual", provider: "runner", mimeType: "image/png", when: "baseline", bytes: baselineBytes },
      { name: "actual.png", kind: "visual", provider: "agent", mimeType: "image/png", when: "actual", bytes: actualBytes },
      ...(diffPng ? [{ name: "diff.png", kind: "visual", provider: "runner", mimeType: "image/png", when: "diff", bytes: diffPng }] : []),
    ];
    // The screen compared is the step's before; the screen once the check is done, its after (the same file when nothing moved).
    const after = await takeStepShot(device, session.timeoutMs);
    recorded = await recordStep(recorder, {
      action: "assert-visual",
      description: `visual check against ${name} (${engine}, threshold ${pctText(thresholdPct)})`,
      arguments: { baseline: { name, sha256: baselineSha }, masks: masks.map((m) => ({ ...m })), threshold: thresholdPct, engine },
      ok: result.passed,
      ...(result.passed ? {} : { errorCode: Errors.VISUAL_MISMATCH.code, errorMessage: failureText(result, name, thresholdPct) }),
      response,
      files,
      startMs,
      durationMs,
      before: { bytes: actualBytes, sha256: actualSha, capturedAt: shotAt },
      after,
    });
  }

  const data = {
    passed: result.passed,
    ...response,
    baseline: { file: baselinePath, sha256: baselineSha },
    actual: { sha256: actualSha, ...(actualFile ? { file: actualFile } : {}) },
    ...(diffFile ? { diffFile } : {}),
    ...(result.passed ? {} : { code: Errors.VISUAL_MISMATCH.code, message: failureText(result, name, thresholdPct) }),
    ...(recorded ? { sessionStep: recorded } : {}),
  };
  const pretty = () =>
    [
      result.passed
        ? `passed: ${result.differentPixels} of ${result.comparedPixels} pixels (${pctText(result.diffPct)}) differ from ${name} (${engine}, threshold ${pctText(thresholdPct)})`
        : `FAILED: ${failureText(result, name, thresholdPct)} (${engine}) [${Errors.VISUAL_MISMATCH.code}]`,
      ...(diffFile ? [`diff: ${diffFile}`] : []),
      ...(diffPng && !diffFile && !recorder ? ["the diff is not kept: pass --output-dir DIR to keep it (or check in a session)"] : []),
      ...(actualFile ? [`actual: ${actualFile}`] : []),
      ...(recorded?.ok ? [`recorded as step ${recorded.sequence} of session ${recorded.sessionId}`] : []),
    ].join("\n");
  if (recorded && !recorded.ok) {
    // The check ran, but the session's timeline misses it: that fails the command whatever the check said.
    const message = `the check ${result.passed ? "passed" : "failed"} (${pctText(result.diffPct)} differs) but could not be recorded in session ${recorded.sessionId}: ${recorded.message}`;
    ctx.printer.emit({ ...data, ok: false, code: recorded.code, message }, () => `${pretty()}\nerror: ${message} [${recorded.code}]`);
    return 1;
  }
  ctx.printer.result(data, pretty);
  return result.passed ? 0 : 1;
};
