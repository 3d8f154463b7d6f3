import type { AdbServerAddress } from "../adb/adb-client.js";
import { forwardToAnyPort, killForward, listForwards, type Forward } from "../adb/adb-host.js";
import { shellV2 } from "../adb/adb-shell.js";
import { bridgeError, BridgeErrors } from "./bridge-error.js";
import { Budget, parseJson, sdkGet, type SdkResponse } from "./sdk-http.js";

/** Where the in-app SDK publishes its endpoint, relative to the app's private dir. */
export const ANDROID_ENDPOINT_FILE = "files/farm_sdk_endpoint.json";
export const ANDROID_ENDPOINT_SCHEMA = "farm.android-sdk-endpoint.v1";
export const DESCRIPTOR_MAX_BYTES = 4096;
const CHECK_TIMEOUT_MS = 3_000;
/** Kept back from a discovery's budget so a forward it made can still be removed in time. */
const CLEANUP_RESERVE_MS = 300;
const CLEANUP_TIMEOUT_MS = 500;

const packagePattern = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/;
const epochPattern = /^[A-Za-z0-9-]{1,64}$/;

export interface AndroidDescriptor {
  packageName: string;
  runtimeEpoch: string;
  socketName: string;
  version: string;
  updatedAtMs: number;
}

export interface AndroidEndpoint extends AndroidDescriptor {
  serial: string;
  /** Host port of the adb forward (on the agent's host) to localabstract:socketName. */
  hostPort: number;
  /** True when this call created the forward; false when an exact one was reused. */
  forwardCreated: boolean;
  verifiedAtMs: number;
}

export function validatePackageName(pkg: string): string {
  if (!packagePattern.test(pkg) || pkg.length > 255) throw bridgeError(BridgeErrors.invalid, `"${pkg}" is not an Android package name`, "package");
  return pkg;
}

/**
 * Checks a descriptor exactly: schema, package, epoch, transport, the socket
 * name that epoch implies, version, readiness. Nothing is guessed or repaired.
 */
export function validateAndroidDescriptor(text: string, pkg: string): AndroidDescriptor {
  if (Buffer.byteLength(text) > DESCRIPTOR_MAX_BYTES) throw bridgeError(BridgeErrors.invalid, `the endpoint descriptor is over ${DESCRIPTOR_MAX_BYTES} bytes`);
  const d = parseJson(Buffer.from(text));
  if (!d) throw bridgeError(BridgeErrors.invalid, "the endpoint descriptor is not a JSON object");
  if (d["schema"] !== ANDROID_ENDPOINT_SCHEMA) throw bridgeError(BridgeErrors.invalid, `descriptor schema is ${JSON.stringify(d["schema"])}, expected "${ANDROID_ENDPOINT_SCHEMA}"`);
  if (d["packageName"] !== pkg) throw bridgeError(BridgeErrors.packageMismatch, `the descriptor names package ${JSON.stringify(d["packageName"])}, not ${pkg}`, "package");
  const epoch = d["runtimeEpoch"];
  if (typeof epoch !== "string" || !epochPattern.test(epoch)) throw bridgeError(BridgeErrors.invalid, "the descriptor's runtimeEpoch is missing or malformed");
  if (d["transport"] !== "localabstract") throw bridgeError(BridgeErrors.invalid, `transport ${JSON.stringify(d["transport"])} is not supported (only "localabstract")`);
  if (d["socketName"] !== `farm-sdk-${epoch}`) throw bridgeError(BridgeErrors.invalid, `socket ${JSON.stringify(d["socketName"])} does not belong to runtime ${epoch}`);
  if (typeof d["version"] !== "string" || d["version"] === "") throw bridgeError(BridgeErrors.invalid, "the descriptor has no SDK version");
  const updatedAtMs = d["updatedAtMs"];
  if (typeof updatedAtMs !== "number" || !Number.isFinite(updatedAtMs)) throw bridgeError(BridgeErrors.invalid, "the descriptor has no updatedAtMs");
  if (d["ok"] !== true || d["error"] !== null) {
    throw bridgeError(BridgeErrors.notReady, `the app's SDK is not ready: ${typeof d["error"] === "string" ? d["error"] : "ok is not true"}`);
  }
  return { packageName: pkg, runtimeEpoch: epoch, socketName: d["socketName"] as string, version: d["version"] as string, updatedAtMs };
}

/** Identity headers every request to the SDK carries; it refuses a mismatch. */
export function androidIdentityHeaders(d: AndroidDescriptor): Record<string, string> {
  return { "x-farm-sdk-package": d.packageName, "x-farm-sdk-epoch": d.runtimeEpoch };
}

/** The reply must name the runtime it came from. */
export function checkAndroidBinding(res: SdkResponse, d: AndroidDescriptor): Record<string, unknown> {
  const body = parseJson(res.body);
  const binding = body?.["runtimeBinding"] as { packageName?: unknown; runtimeEpoch?: unknown } | undefined;
  if (res.status === 409) throw bridgeError(BridgeErrors.identityMismatch, `the SDK refused the identity ${d.packageName}@${d.runtimeEpoch}: ${String(body?.["error"] ?? "runtime mismatch")}`);
  if (!binding || binding.packageName !== d.packageName || binding.runtimeEpoch !== d.runtimeEpoch) {
    throw bridgeError(BridgeErrors.identityMismatch, `the reply came from ${String(binding?.packageName)}@${String(binding?.runtimeEpoch)}, not ${d.packageName}@${d.runtimeEpoch}`);
  }
  return body as Record<string, unknown>;
}

/**
 * Finds an app's SDK endpoint on exactly this serial: reads its descriptor
 * through run-as, validates it, creates or reuses the exact adb forward to
 * its abstract socket, and proves the binding with a request before handing
 * the route out. No cached port, no scan, no fallback. Every step shares
 * one budget of timeoutMs, and a forward this call made is removed again
 * if the call fails.
 */
export function discoverAndroidEndpoint(adb: AdbServerAddress, serial: string, pkg: string, timeoutMs = 10_000): Promise<AndroidEndpoint> {
  return discoverWithin(adb, serial, pkg, new Budget(timeoutMs));
}

async function discoverWithin(adb: AdbServerAddress, serial: string, pkg: string, budget: Budget): Promise<AndroidEndpoint> {
  validatePackageName(pkg);
  let read;
  try {
    read = await shellV2(adb, serial, `run-as ${pkg} cat ${ANDROID_ENDPOINT_FILE}`, budget.signal());
  } catch (err) {
    throw bridgeError(BridgeErrors.discoveryFailed, `reading the descriptor on ${serial} failed: ${(err as Error).message}`);
  }
  if (read.exitCode !== 0) {
    const why = (read.stderr.toString("utf8") + read.stdout.toString("utf8")).trim().slice(0, 300);
    throw bridgeError(BridgeErrors.discoveryFailed, `run-as ${pkg} could not read ${ANDROID_ENDPOINT_FILE} on ${serial}: ${why || `exit ${read.exitCode}`}`);
  }
  if (read.stdout.length > DESCRIPTOR_MAX_BYTES) throw bridgeError(BridgeErrors.invalid, `the endpoint descriptor is over ${DESCRIPTOR_MAX_BYTES} bytes`);
  const d = validateAndroidDescriptor(read.stdout.toString("utf8"), pkg);

  const remote = `localabstract:${d.socketName}`;
  const ours = (f: Forward) => f.serial === serial && f.remote === remote && /^tcp:\d+$/.test(f.local);
  let before: Forward[];
  try {
    before = await listForwards(adb, budget.signal(CLEANUP_RESERVE_MS));
  } catch (err) {
    throw bridgeError(BridgeErrors.discoveryFailed, `listing adb forwards failed: ${(err as Error).message}`);
  }
  const existing = before.find(ours);
  let hostPort = existing ? Number(existing.local.slice(4)) : 0;
  if (!existing) {
    try {
      hostPort = await forwardToAnyPort(adb, serial, remote, budget.signal(CLEANUP_RESERVE_MS));
    } catch (err) {
      // Given up on (the deadline) after adb may have made it: remove what is new since we looked.
      await removeForwards(adb, serial, (f) => ours(f) && !before.some((b) => b.local === f.local));
      throw bridgeError(BridgeErrors.discoveryFailed, `adb forward to ${remote} on ${serial} failed: ${(err as Error).message}`);
    }
  }
  // The forward exists; is the SDK on the other end the runtime the descriptor names?
  try {
    let res: SdkResponse;
    try {
      res = await sdkGet("127.0.0.1", hostPort, "/v1/info", androidIdentityHeaders(d), budget.slice(CHECK_TIMEOUT_MS, CLEANUP_RESERVE_MS));
    } catch (err) {
      throw bridgeError(BridgeErrors.notReady, `nothing answers completely on ${remote} (${(err as Error).message}): the app is not running, its SDK has not bound yet, or it is stuck`);
    }
    checkAndroidBinding(res, d);
  } catch (err) {
    // A route that was never proven is not left behind; one we only reused is not ours to remove.
    if (!existing) await removeForwards(adb, serial, (f) => f.local === `tcp:${hostPort}` && f.remote === remote);
    throw err;
  }
  return { ...d, serial, hostPort, forwardCreated: !existing, verifiedAtMs: Date.now() };
}

/** Best effort, bounded by its own short deadline (the caller's budget keeps room for it). */
async function removeForwards(adb: AdbServerAddress, serial: string, which: (f: Forward) => boolean): Promise<void> {
  try {
    const signal = AbortSignal.timeout(CLEANUP_TIMEOUT_MS);
    for (const f of (await listForwards(adb, signal)).filter((x) => x.serial === serial && which(x))) {
      await killForward(adb, serial, Number(f.local.slice(4)), signal);
    }
  } catch {
    // The adb server is gone or slow: its forwards went with it, or `farm app remove-forward` clears them.
  }
}

/** Told of an attempt that was given up on and repeated. */
export type RetryObserver = (attempt: { startedAt: number; durationMs: number; error: unknown }) => void;

/**
 * A GET to the app's SDK, through an endpoint found earlier (`known`) or
 * discovered now. If the app restarted in between (its old socket is gone,
 * or its new runtime refuses the old identity), the endpoint is discovered
 * again, once, and the request repeated against the new runtime. All of it
 * (discovery, request, rediscovery, request) within one budget of timeoutMs.
 */
export async function androidSdkGet(
  adb: AdbServerAddress,
  serial: string,
  pkg: string,
  path: string,
  timeoutMs = 10_000,
  known?: AndroidEndpoint,
  onRetry?: RetryObserver,
): Promise<{ endpoint: AndroidEndpoint; body: Record<string, unknown>; raw: Buffer; rediscovered: boolean }> {
  const budget = new Budget(timeoutMs);
  let endpoint = known ?? (await discoverWithin(adb, serial, pkg, budget));
  for (let attempt = 0;; attempt++) {
    const startedAt = Date.now();
    try {
      const res = await sdkGet("127.0.0.1", endpoint.hostPort, path, androidIdentityHeaders(endpoint), budget.remaining());
      const body = checkAndroidBinding(res, endpoint);
      if (res.status !== 200) throw bridgeError(BridgeErrors.notReady, `the SDK answered ${res.status} to ${path}: ${String(body["error"] ?? "")}`);
      return { endpoint, body, raw: res.body, rediscovered: attempt > 0 };
    } catch (err) {
      const code = (err as { details?: { value?: { code?: string } }[] }).details?.[0]?.value?.code;
      const stale = code === BridgeErrors.identityMismatch.code || /ECONNRESET|socket hang up|ECONNREFUSED/.test((err as Error).message);
      if (!stale || attempt > 0) throw err;
      // The first attempt is given up on: whoever records the call (a session step) sees it.
      onRetry?.({ startedAt, durationMs: Date.now() - startedAt, error: err });
      endpoint = await discoverWithin(adb, serial, pkg, budget);
    }
  }
}

/** Removes a forward only after checking it is this serial's. */
export async function removeAndroidForward(adb: AdbServerAddress, serial: string, port: number): Promise<void> {
  const f = (await listForwards(adb)).find((x) => x.local === `tcp:${port}`);
  if (!f) throw bridgeError(BridgeErrors.forwardNotOwned, `no forward on tcp:${port}`, "port");
  if (f.serial !== serial) throw bridgeError(BridgeErrors.forwardNotOwned, `forward tcp:${port} belongs to ${f.serial}, not ${serial}`, "port");
  await killForward(adb, serial, port);
}
