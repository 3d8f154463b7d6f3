import { createHash, randomUUID } from "node:crypto";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { EvidenceArtifact, EvidenceError, EvidenceManifest, EvidenceStatus } from "@farm/shared/evidence-manifest";
import { ensurePrivateDir, writePrivateFile } from "@farm/shared/secure-file";
import type { AdbServerAddress } from "../adb-client.js";
import { execOut } from "../adb-exec.js";
import { shellV2 } from "../adb-shell.js";
import type { AdbServiceError } from "../adb-service.js";
import { checkPng, PNG_MAX_BYTES } from "./png-check.js";
import { looksLikeHierarchy, parseAwake, parseLocked } from "./device-observations.js";
import { readDeviceMetadata } from "./device-metadata.js";
import { androidSdkGet } from "../app-sdk/android-endpoint.js";

/** Below this much budget the hierarchy is not attempted (UIAutomator's own minimum). */
const HIERARCHY_MIN_MS = 1_000;
const HIERARCHY_MAX_BYTES = 32 * 1024 * 1024;

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
 * Captures a still bundle from one device into a staging directory: the
 * screenshot first, then the raw hierarchy on the same device, then the
 * metadata, each within what is left of the budget and independent of the
 * others' failures. The manifest is written last.
 */
export async function captureStill(req: StillCaptureRequest, deps: StillCaptureDeps): Promise<StagedBundle> {
  const dir = join(deps.stagingDir, req.evidenceId);
  await ensurePrivateDir(dir);
  const deadline = performance.now() + req.timeoutMs;
  const remaining = () => Math.max(0, deadline - performance.now());
  const startedAt = iso();
  const artifacts: EvidenceArtifact[] = [];
  const errors: EvidenceError[] = [];
  const files: string[] = [];
  const captures: Record<string, unknown> = {};

  const write = async (path: string, bytes: Buffer) => {
    await writePrivateFile(join(dir, path), bytes);
    files.push(path);
  };
  const fail = (code: string, stage: string, message: string, component: string | null): EvidenceError => {
    const e = { code, stage, message, component };
    errors.push(e);
    return e;
  };

  // 1. Screenshot.
  const shotTask = randomUUID();
  const shotStart = Date.now();
  const shotT0 = performance.now();
  const shot = await execOut(deps.adb, req.serial, "screencap -p", { signal: AbortSignal.timeout(Math.max(1, Math.ceil(remaining()))), maxBytes: PNG_MAX_BYTES });
  const shotObserved = Date.now();
  let screenshotOk = false;
  {
    const base = { kind: "screenshot" as const, mimeType: "image/png", startedAt: iso(shotStart), commandId: req.commandId, taskId: shotTask };
    let error: EvidenceError | undefined;
    let status: EvidenceArtifact["status"] = "failed";
    let path: string | null = null;
    if (shot.error) {
      error = fail(transferCode(shot.error, "SCREENSHOT"), "screenshot", `screenshot transfer failed after ${shot.bytes.length} bytes: ${shot.error.message}`, "adb");
    } else {
      const check = await checkPng(shot.bytes);
      if (check.ok) {
        screenshotOk = true;
        status = "complete";
      } else {
        error = fail(check.code, "screenshot", check.message, "png-verify");
      }
    }
    if (screenshotOk) path = "screenshot.png";
    else if (shot.bytes.length > 0) {
      path = "screenshot.partial.png";
      status = "partial";
    }
    if (path) await write(path, shot.bytes);
    artifacts.push({
      ...base,
      path,
      status,
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
      command: "exec:screencap -p",
      result: { ok: !shot.error, bytes: shot.bytes.length, error: shot.error ? { code: shot.error.code, phase: shot.error.phase, message: shot.error.message } : null },
      observedAt: iso(shotObserved),
      persistedAt: iso(),
    };
  }

  // 2. Raw hierarchy (UIAutomator), read-only readiness first.
  const uiTask = randomUUID();
  const uiStart = Date.now();
  const uiT0 = performance.now();
  let hierarchyOk = false;
  {
    // The app's own tree is JSON from its SDK; UIAutomator's is XML.
    const fromApp = req.appPackage !== null;
    const ext = fromApp ? "json" : "xml";
    const base = { kind: "hierarchy" as const, mimeType: fromApp ? "application/json" : "application/xml", startedAt: iso(uiStart), commandId: req.commandId, taskId: uiTask };
    let error: EvidenceError | undefined;
    let xml: Buffer | undefined;
    const record: Record<string, unknown> = { source: fromApp ? "app-sdk" : "uiautomator", commandId: req.commandId, taskId: uiTask };
    if (remaining() < HIERARCHY_MIN_MS) {
      error = fail("COMMAND_TIMEOUT", "hierarchy", `less than ${HIERARCHY_MIN_MS} ms of the budget left; the hierarchy was not requested`, null);
      record["result"] = { ok: false, dispatched: false };
    } else {
      const r = fromApp ? await captureAppHierarchy(deps.adb, req.serial, req.appPackage as string, remaining) : await captureHierarchy(deps.adb, req.serial, req.evidenceId, remaining);
      record["result"] = r.record;
      xml = r.xml;
      if (r.error) error = fail(r.error.code, "hierarchy", r.error.message, r.error.component);
      else hierarchyOk = true;
    }
    const path = hierarchyOk ? `hierarchy.${ext}` : xml && xml.length > 0 ? `hierarchy.partial.${ext}` : null;
    if (path && xml) await write(path, xml);
    artifacts.push({
      ...base,
      path,
      status: hierarchyOk ? "complete" : path ? "partial" : "failed",
      bytes: path && xml ? xml.length : null,
      sha256: path && xml ? sha256(xml) : null,
      finishedAt: iso(),
      durationMs: round(performance.now() - uiT0),
      ...(error ? { error } : {}),
    });
    record["persistedAt"] = iso();
    captures["hierarchy"] = record;
  }

  // 3. Metadata, within what is left (persistence may run past the deadline).
  const device = await readDeviceMetadata(
    { adb: deps.adb, serial: req.serial, physicalId: deps.device.physicalId, bootId: deps.device.bootId, agent: deps.agent, cliVersion: req.cliVersion, hierarchySource: req.appPackage ? "app-sdk" : "uiautomator", appPackage: req.appPackage },
    remaining,
    fail,
  );

  // 4. Capture records.
  const capT0 = performance.now();
  const capStart = Date.now();
  const capturesBytes = Buffer.from(JSON.stringify({ evidenceId: req.evidenceId, serial: req.serial, captures }, null, 2) + "\n");
  let capturesOk = true;
  try {
    await write("captures.json", capturesBytes);
  } catch (err) {
    capturesOk = false;
    fail("RECEIPT_WRITE_FAILED", "persist", (err as Error).message, "agent");
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

  const metadataOk = device.apiLevel !== null && device.androidVersion !== null && device.manufacturer !== null && device.model !== null && device.display !== null;
  const status: EvidenceStatus =
    screenshotOk && hierarchyOk && metadataOk && capturesOk ? "complete" : screenshotOk || hierarchyOk ? "partial" : "failed";
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
  await writePrivateFile(join(dir, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
  return { dir, manifest, files };
}

interface HierarchyResult {
  xml?: Buffer;
  error?: { code: string; message: string; component: string | null };
  record: Record<string, unknown>;
}

async function captureHierarchy(adb: AdbServerAddress, serial: string, evidenceId: string, remaining: () => number): Promise<HierarchyResult> {
  const signal = () => AbortSignal.timeout(Math.max(1, Math.ceil(remaining())));
  try {
    // Read-only readiness: never wake the device or send input.
    const power = await shellV2(adb, serial, "dumpsys power", signal());
    const awake = parseAwake(power.stdout.toString("utf8"));
    if (awake === false) return { error: { code: "DEVICE_ASLEEP", message: "the screen is off; the hierarchy is not captured (no wake is attempted)", component: "readiness" }, record: { ok: false, dispatched: false, awake } };
    const window = await shellV2(adb, serial, "dumpsys window", signal());
    const locked = parseLocked(window.stdout.toString("utf8"));
    if (locked === true) return { error: { code: "DEVICE_LOCKED", message: "the device is locked; the hierarchy is not captured (no unlock is attempted)", component: "readiness" }, record: { ok: false, dispatched: false, awake, locked } };
    const file = `/data/local/tmp/farm-ui-${evidenceId}.xml`;
    const dump = await shellV2(adb, serial, `uiautomator dump ${file}`, signal());
    const dumpText = (dump.stdout.toString("utf8") + dump.stderr.toString("utf8")).trim();
    const record: Record<string, unknown> = { ok: dump.exitCode === 0, exitCode: dump.exitCode, output: dumpText.slice(0, 4096), awake, locked };
    if (dump.exitCode !== 0 || !/dumped to/i.test(dumpText)) {
      return { error: { code: "HIERARCHY_DUMP_FAILED", message: `uiautomator dump failed (exit ${dump.exitCode}): ${dumpText.slice(0, 500)}`, component: "uiautomator" }, record };
    }
    const read = await execOut(adb, serial, `cat ${file}`, { signal: signal(), maxBytes: HIERARCHY_MAX_BYTES });
    await shellV2(adb, serial, `rm -f ${file}`, signal()).catch(() => undefined);
    record["bytes"] = read.bytes.length;
    if (read.error) return { xml: read.bytes, error: { code: transferCode(read.error, "HIERARCHY"), message: `reading the dump failed: ${read.error.message}`, component: "adb" }, record };
    if (!looksLikeHierarchy(read.bytes.toString("utf8"))) {
      return { xml: read.bytes, error: { code: "HIERARCHY_INVALID", message: "the dump is not a complete UIAutomator hierarchy document", component: "uiautomator" }, record };
    }
    return { xml: read.bytes, record };
  } catch (err) {
    const e = err as AdbServiceError;
    return { error: { code: transferCode(e, "HIERARCHY"), message: e.message, component: "adb" }, record: { ok: false, error: e.message } };
  }
}

/**
 * The hierarchy from the app's SDK: its endpoint discovered and verified on
 * this serial, then its own view tree, kept as the bytes it sent. No
 * fallback to UIAutomator: a capture that asked for the app's tree says why
 * it did not get it.
 */
async function captureAppHierarchy(adb: AdbServerAddress, serial: string, pkg: string, remaining: () => number): Promise<HierarchyResult> {
  try {
    const r = await androidSdkGet(adb, serial, pkg, "/v1/tree", Math.max(1_000, Math.floor(remaining())));
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
    const code = (err as { details?: { value?: { code?: string } }[] }).details?.[0]?.value?.code ?? "HIERARCHY_TRANSFER_FAILED";
    return { error: { code, message: (err as Error).message, component: "app-sdk" }, record: { ok: false, code } };
  }
}

function transferCode(e: AdbServiceError, what: "SCREENSHOT" | "HIERARCHY"): string {
  switch (e.code) {
    case "DEADLINE_EXCEEDED":
      return "COMMAND_TIMEOUT";
    case "OUTPUT_TOO_LARGE":
      return `${what}_TOO_LARGE`;
    case "DEVICE_OFFLINE":
      return "DEVICE_OFFLINE";
    default:
      return `${what}_TRANSFER_FAILED`;
  }
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
