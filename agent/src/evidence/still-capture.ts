import { createHash, randomUUID } from "node:crypto";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fsyncDir, writeFileDurably } from "@farm/shared/durable-file";
import { Errors, farmError, type ErrorCode } from "@farm/shared/errors";
import type { EvidenceArtifact, EvidenceError, EvidenceManifest, EvidenceStatus, ManifestErrorCode } from "@farm/shared/evidence-manifest";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2 } from "../adb/adb-shell.js";
import type { AdbServiceError } from "../adb/adb-service.js";
import { androidSdkGet, type RetryObserver } from "../app-sdk/android-endpoint.js";
import { checkPng, PNG_MAX_BYTES } from "./png-check.js";
import { looksLikeHierarchy, parseAwake, parseLocked } from "./device-observations.js";
import { metadataComplete, readDeviceMetadata } from "./device-metadata.js";
import { shellOutput, type OutputFailureCode } from "./shell-output.js";

/** The hierarchy floor for budgets of 2000 ms and more (see hierarchyFloorMs). */
const HIERARCHY_MIN_MS = 1_000;
const HIERARCHY_MAX_BYTES = 32 * 1024 * 1024;
/** Removing the dump file from the phone, after the observation. */
const CLEANUP_MS = 5_000;

export interface StillCaptureRequest {
  evidenceId: string;
  commandId: string;
  serial: string;
  label: string | null;
  context: Record<string, unknown>;
  timeoutMs: number;
  cliVersion: string | null;
  /** Take the hierarchy from this app's SDK (its own view tree) instead of UIAutomator. */
  appPackage: string | null;
}

export interface StillCaptureDeps {
  adb: AdbServerAddress;
  stagingDir: string;
  device: { physicalId: string | null; bootId: string | null };
  agent: { id: string; host: string; version: string };
}

export interface StagedBundle {
  dir: string;
  manifest: EvidenceManifest;
  /** Bundle-relative paths of the files written, manifest excluded. */
  files: string[];
}

const iso = (ms = Date.now()) => new Date(ms).toISOString();
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/**
 * The hierarchy is not requested when less than this is left of the budget:
 * 1000 ms (UIAutomator is not worth starting with less), but never more
 * than half of the whole budget, so the documented minimum budget (1000 ms)
 * still leaves a fast phone room for a complete bundle.
 */
export function hierarchyFloorMs(budgetMs: number): number {
  return Math.min(HIERARCHY_MIN_MS, Math.floor(budgetMs / 2));
}

/**
 * Captures a still bundle from one device into a staging directory: the
 * screenshot first, then the raw hierarchy on the same device, then the
 * metadata, each within what is left of the budget and independent of the
 * others' failures. Files are then published whole (temp name, fsync,
 * rename, directory fsync), the manifest last. A file the staging disk
 * cannot hold is a failed artifact with its error; a manifest it cannot hold
 * fails the capture with EVIDENCE_CAPTURE_FAILED naming the evidence id.
 */
export async function captureStill(req: StillCaptureRequest, deps: StillCaptureDeps): Promise<StagedBundle> {
  const dir = join(deps.stagingDir, req.evidenceId);
  await ensurePrivateDir(dir);
  // The bundle's directory outlives a crash, so a restarted agent finds what it staged.
  await fsyncDir(deps.stagingDir);
  const deadline = performance.now() + req.timeoutMs;
  const remaining = () => Math.max(0, deadline - performance.now());
  const startedAt = iso();
  const artifacts: EvidenceArtifact[] = [];
  const errors: EvidenceError[] = [];
  const files: string[] = [];
  const captures: Record<string, unknown> = {};

  const fail = (code: ManifestErrorCode, stage: string, message: string, component: string | null): EvidenceError => {
    const e = { code, stage, message, component };
    errors.push(e);
    return e;
  };
  /** Publishes one file; a failure to store it is returned as that artifact's error. */
  const persist = async (path: string, bytes: Buffer): Promise<EvidenceError | undefined> => {
    try {
      await writeFileDurably(join(dir, path), bytes);
      files.push(path);
      return undefined;
    } catch (err) {
      return fail("EVIDENCE_STORAGE_FAILED", "persist", `${path} could not be written to the agent's staging dir: ${(err as Error).message}`, "agent");
    }
  };

  /** The screenshot: verified, then stored whole under its final or partial name; true when complete. */
  async function finishScreenshot(): Promise<boolean> {
    let screenshotOk = false;
    let error: EvidenceError | undefined;
    if (shot.failure) {
      error = fail(outputCode(shot.failure.code, "SCREENSHOT"), "screenshot", `screenshot transfer failed after ${shot.bytes.length} bytes: ${shot.failure.message}`, "adb");
    } else {
      const check = await checkPng(shot.bytes);
      if (check.ok) screenshotOk = true;
      else error = fail(check.code, "screenshot", check.message, "png-verify");
    }
    let path: string | null = screenshotOk ? "screenshot.png" : shot.bytes.length > 0 ? "screenshot.partial.png" : null;
    const stored = path ? await persist(path, shot.bytes) : undefined;
    if (stored) {
      path = null;
      screenshotOk = false;
      error = stored;
    }
    artifacts.push({
      kind: "screenshot",
      mimeType: "image/png",
      startedAt: iso(shotStart),
      commandId: req.commandId,
      taskId: shotTask,
      path,
      status: screenshotOk ? "complete" : path ? "partial" : "failed",
      bytes: path ? shot.bytes.length : null,
      sha256: path ? sha256(shot.bytes) : null,
      finishedAt: iso(),
      durationMs: round(performance.now() - shotT0),
      ...(error ? { error } : {}),
    });
    captures["screenshot"] = {
      source: "adb_screencap",
      commandId: req.commandId,
      taskId: shotTask,
      command: "shell,v2:screencap -p",
      // Transport completion only: ok needs the command's exit status, which a cut stream never carries.
      result: { ok: !shot.failure, exitCode: shot.exitCode, bytes: shot.bytes.length, error: shot.failure ? { code: shot.failure.code, message: shot.failure.message } : null },
      observedAt: iso(shotObserved),
      persistedAt: iso(),
    };
    return screenshotOk;
  }

  // 1. Screenshot bytes, over shell v2 so a cut stream is known as one.
  const shotTask = randomUUID();
  const shotStart = Date.now();
  const shotT0 = performance.now();
  const fromApp = req.appPackage !== null;
  const shotRead = shellOutput(deps.adb, req.serial, "screencap -p", { timeoutMs: remaining(), maxBytes: PNG_MAX_BYTES });
  // Reads that change nothing run while the phone encodes the PNG (hundreds
  // of milliseconds on a real phone), not after it: UIAutomator's readiness
  // (asked before any dump, as before) and the metadata. Neither touches
  // the screen, so the screenshot still comes first and the hierarchy after.
  const readiness = fromApp ? undefined : readReadiness(deps.adb, req.serial, remaining);
  // Awaited only if the hierarchy is requested; a handler keeps its failure from counting as unhandled.
  readiness?.catch(() => undefined);
  const metadata = readDeviceMetadata(
    { adb: deps.adb, serial: req.serial, physicalId: deps.device.physicalId, bootId: deps.device.bootId, agent: deps.agent, cliVersion: req.cliVersion, hierarchySource: fromApp ? "app-sdk" : "uiautomator", appPackage: req.appPackage },
    remaining,
    fail,
  );
  const shot = await shotRead;
  const shotObserved = Date.now();
  // Verifying and storing it is host work: it runs while the phone is asked for its hierarchy.
  const shotFinished = finishScreenshot();
  // Awaited below; a handler now keeps an early failure from counting as unhandled meanwhile.
  shotFinished.catch(() => undefined);

  // 2. Raw hierarchy (UIAutomator, or the app's SDK), read-only readiness first.
  const uiTask = randomUUID();
  const uiStart = Date.now();
  const uiT0 = performance.now();
  const uiRecord: Record<string, unknown> = { source: fromApp ? "app-sdk" : "uiautomator", commandId: req.commandId, taskId: uiTask };
  let ui: HierarchyResult;
  const floor = hierarchyFloorMs(req.timeoutMs);
  if (remaining() < floor) {
    ui = { error: { code: "COMMAND_TIMEOUT", message: `less than ${floor} ms of the ${req.timeoutMs} ms budget left; the hierarchy was not requested`, component: null }, record: { ok: false, dispatched: false } };
  } else {
    ui = fromApp ? await captureAppHierarchy(deps.adb, req.serial, req.appPackage as string, remaining) : await captureHierarchy(deps.adb, req.serial, req.evidenceId, remaining, readiness);
  }
  const uiObserved = Date.now();
  let uiError = ui.error ? fail(ui.error.code, "hierarchy", ui.error.message, ui.error.component) : undefined;

  // 3. Metadata, read alongside the screenshot (within the same budget).
  const device = await metadata;

  const screenshotOk = await shotFinished;

  // 4. The hierarchy, stored the same way.
  let hierarchyOk = !uiError;
  {
    const ext = fromApp ? "json" : "xml";
    uiRecord["result"] = ui.record;
    const doc = ui.xml;
    let path: string | null = hierarchyOk ? `hierarchy.${ext}` : doc && doc.length > 0 ? `hierarchy.partial.${ext}` : null;
    const stored = path && doc ? await persist(path, doc) : undefined;
    if (stored) {
      path = null;
      hierarchyOk = false;
      uiError = stored;
    }
    artifacts.push({
      kind: "hierarchy",
      mimeType: fromApp ? "application/json" : "application/xml",
      startedAt: iso(uiStart),
      commandId: req.commandId,
      taskId: uiTask,
      path,
      status: hierarchyOk ? "complete" : path ? "partial" : "failed",
      bytes: path && doc ? doc.length : null,
      sha256: path && doc ? sha256(doc) : null,
      finishedAt: iso(),
      durationMs: round(performance.now() - uiT0),
      ...(uiError ? { error: uiError } : {}),
    });
    uiRecord["observedAt"] = iso(uiObserved);
    uiRecord["persistedAt"] = iso();
    captures["hierarchy"] = uiRecord;
  }

  // 5. Capture records.
  const capT0 = performance.now();
  const capStart = Date.now();
  const capturesBytes = Buffer.from(JSON.stringify({ evidenceId: req.evidenceId, serial: req.serial, captures }, null, 2) + "\n");
  let capturesOk = true;
  try {
    await writeFileDurably(join(dir, "captures.json"), capturesBytes);
    files.push("captures.json");
  } catch (err) {
    capturesOk = false;
    fail("RECEIPT_WRITE_FAILED", "persist", `captures.json could not be written to the agent's staging dir: ${(err as Error).message}`, "agent");
  }
  artifacts.push({
    kind: "capture_envelopes",
    path: capturesOk ? "captures.json" : null,
    mimeType: "application/json",
    status: capturesOk ? "complete" : "failed",
    bytes: capturesOk ? capturesBytes.length : null,
    sha256: capturesOk ? sha256(capturesBytes) : null,
    startedAt: iso(capStart),
    finishedAt: iso(),
    durationMs: round(performance.now() - capT0),
    commandId: null,
    taskId: null,
  });

  const status: EvidenceStatus = screenshotOk && hierarchyOk && metadataComplete(device) && capturesOk ? "complete" : screenshotOk || hierarchyOk ? "partial" : "failed";
  const manifest: EvidenceManifest = {
    schemaVersion: 1,
    evidenceId: req.evidenceId,
    kind: "still",
    label: req.label,
    context: req.context,
    device,
    startedAt,
    finishedAt: iso(),
    status,
    artifacts,
    errors,
  };
  try {
    await writeFileDurably(join(dir, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
  } catch (err) {
    throw farmError(
      Errors.EVIDENCE_CAPTURE_FAILED,
      `evidence ${req.evidenceId}: the manifest could not be written to the agent's staging dir (${(err as Error).message}); ${files.length} file(s) written so far stay in ${dir}`,
      undefined,
      undefined,
      err,
    );
  }
  return { dir, manifest, files };
}

/** A raw hierarchy read (also read by agent/src/ui for `farm ui tree` and taps by element). */
export interface HierarchyResult {
  xml?: Buffer;
  error?: { code: ManifestErrorCode; message: string; component: string | null };
  record: Record<string, unknown>;
}

/** What UIAutomator's readiness reads saw: awake (dumpsys power) and locked (dumpsys window); null when not known. */
export interface Readiness {
  awake: boolean | null;
  locked: boolean | null;
}

/**
 * Read-only readiness for a UIAutomator dump (never a wake or input), both
 * asked at once. Rejects with the adb error when either read fails.
 */
export async function readReadiness(adb: AdbServerAddress, serial: string, remaining: () => number): Promise<Readiness> {
  const signal = () => AbortSignal.timeout(Math.max(1, Math.ceil(remaining())));
  const [power, window] = await Promise.all([shellV2(adb, serial, "dumpsys power", signal()), shellV2(adb, serial, "dumpsys window", signal())]);
  return { awake: parseAwake(power.stdout.toString("utf8")), locked: parseLocked(window.stdout.toString("utf8")) };
}

/**
 * The UIAutomator hierarchy: readiness (read now, or already asked for by
 * the caller), then the dump and its document in one shell, so the phone
 * starts one shell for both: the dump's own message goes to stderr and the
 * document alone to stdout.
 */
export async function captureHierarchy(adb: AdbServerAddress, serial: string, evidenceId: string, remaining: () => number, readiness?: Promise<Readiness>): Promise<HierarchyResult> {
  try {
    const { awake, locked } = await (readiness ?? readReadiness(adb, serial, remaining));
    if (awake === false) return { error: { code: "DEVICE_ASLEEP", message: "the screen is off; the hierarchy is not captured (no wake is attempted)", component: "readiness" }, record: { ok: false, dispatched: false, awake } };
    if (locked === true) return { error: { code: "DEVICE_LOCKED", message: "the device is locked; the hierarchy is not captured (no unlock is attempted)", component: "readiness" }, record: { ok: false, dispatched: false, awake, locked } };
    const file = `/data/local/tmp/farm-ui-${evidenceId}.xml`;
    const read = await shellOutput(adb, serial, `uiautomator dump ${file} >&2 && cat ${file}`, { timeoutMs: remaining(), maxBytes: HIERARCHY_MAX_BYTES });
    // Cleanup is not part of the observation: it gets its own short deadline, not the caller's budget.
    void shellV2(adb, serial, `rm -f ${file}`, AbortSignal.timeout(CLEANUP_MS)).catch(() => undefined);
    const dumpText = read.stderr;
    const dumped = /dumped to/i.test(dumpText);
    const record: Record<string, unknown> = { ok: dumped && read.exitCode === 0, exitCode: read.exitCode, output: dumpText.slice(0, 4096), awake, locked };
    if (!dumped) {
      if (read.exitCode !== null || !read.failure) {
        return { error: { code: "HIERARCHY_DUMP_FAILED", message: `uiautomator dump failed (exit ${read.exitCode}): ${dumpText.slice(0, 500)}`, component: "uiautomator" }, record };
      }
      return { error: { code: outputCode(read.failure.code, "HIERARCHY"), message: `uiautomator dump did not finish: ${read.failure.message}`, component: "adb" }, record };
    }
    record["bytes"] = read.bytes.length;
    if (read.failure) return { xml: read.bytes, error: { code: outputCode(read.failure.code, "HIERARCHY"), message: `reading the dump failed: ${read.failure.message}`, component: "adb" }, record };
    if (!looksLikeHierarchy(read.bytes.toString("utf8"))) {
      return { xml: read.bytes, error: { code: "HIERARCHY_INVALID", message: "the dump is not a complete UIAutomator hierarchy document", component: "uiautomator" }, record };
    }
    return { xml: read.bytes, record };
  } catch (err) {
    const e = err as AdbServiceError;
    return { error: { code: outputCode(e.code, "HIERARCHY"), message: e.message, component: "adb" }, record: { ok: false, error: e.message } };
  }
}

/**
 * The hierarchy from the app's SDK: its endpoint discovered and verified on
 * this serial, then its own view tree, kept as the bytes it sent. No
 * fallback to UIAutomator: a capture that asked for the app's tree says why
 * it did not get it.
 */
export async function captureAppHierarchy(adb: AdbServerAddress, serial: string, pkg: string, remaining: () => number, onRetry?: RetryObserver): Promise<HierarchyResult> {
  try {
    const r = await androidSdkGet(adb, serial, pkg, "/v1/tree", Math.max(1, Math.floor(remaining())), undefined, onRetry);
    const record = {
      ok: true,
      endpoint: { packageName: r.endpoint.packageName, runtimeEpoch: r.endpoint.runtimeEpoch, socketName: r.endpoint.socketName, hostPort: r.endpoint.hostPort, forwardCreated: r.endpoint.forwardCreated, version: r.endpoint.version },
      rediscovered: r.rediscovered,
      bytes: r.raw.length,
    };
    if (typeof r.body["root"] !== "object" || r.body["root"] === null) {
      return { xml: r.raw, error: { code: "HIERARCHY_INVALID", message: "the app's SDK answered without a root node", component: "app-sdk" }, record };
    }
    return { xml: r.raw, record };
  } catch (err) {
    // A farm error from the SDK bridge keeps its code (a table code).
    const code: ManifestErrorCode = ((err as { details?: { value?: { code?: string } }[] }).details?.[0]?.value?.code as ErrorCode | undefined) || "HIERARCHY_TRANSFER_FAILED";
    return { error: { code, message: (err as Error).message, component: "app-sdk" }, record: { ok: false, code } };
  }
}

function outputCode(code: OutputFailureCode | AdbServiceError["code"], what: "SCREENSHOT" | "HIERARCHY"): ManifestErrorCode {
  switch (code) {
    case "DEADLINE_EXCEEDED":
      return "COMMAND_TIMEOUT";
    case "OUTPUT_TOO_LARGE":
      return `${what}_TOO_LARGE`;
    case "DEVICE_OFFLINE":
      return "DEVICE_OFFLINE";
    case "COMMAND_FAILED":
      return `${what}_COMMAND_FAILED`;
    default:
      return `${what}_TRANSFER_FAILED`;
  }
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
