import { create } from "@bufbuild/protobuf";
import type { Logger } from "@farm/shared/log";
import { DeviceReportSchema, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { bridgeError, BridgeErrors } from "../app-sdk/bridge-error.js";
import { Budget, parseJson, sdkGet } from "../app-sdk/sdk-http.js";
import type { DeviceWatcher } from "../devices/device-watcher.js";
import { copyFromAppContainer, listDevices, type Devicectl, type DevicectlDevice } from "./devicectl.js";

export const IOS_SDK_DESCRIPTOR = "Documents/farm_sdk_runtime.json";
export const IOS_SDK_SCHEMA = "farm.ios-runtime/v1";
export const IOS_WDA_DESCRIPTOR = "Documents/farm_wda.json";
export const IOS_WDA_SCHEMA = "farm.ios-wda/v1";
export const IOS_DESCRIPTOR_MAX_BYTES = 4096;
const POLL_MS = 3_000;
const CHECK_TIMEOUT_MS = 3_000;

const bundlePattern = /^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$/;
const epochPattern = /^[A-Za-z0-9-]{1,64}$/;

export interface IosRuntime {
  schemaVersion: string;
  bundleId: string;
  runtimeEpoch: string;
  processId: number;
  port: number;
}

export interface IosEndpoint extends IosRuntime {
  host: string;
  verifiedAtMs: number;
}

/** The identity headers every request carries; the runtime checks all five. */
export function iosIdentityHeaders(r: IosRuntime): Record<string, string> {
  return {
    "x-farm-runtime-schema": r.schemaVersion,
    "x-farm-bundle-id": r.bundleId,
    "x-farm-runtime-epoch": r.runtimeEpoch,
    "x-farm-process-id": String(r.processId),
    "x-farm-runtime-port": String(r.port),
  };
}

/** A descriptor, checked field by field; only ok:true with a real port authorizes HTTP. */
export function validateIosDescriptor(bytes: Buffer, schema: string, bundleId: string): IosRuntime {
  if (bytes.length > IOS_DESCRIPTOR_MAX_BYTES) throw bridgeError(BridgeErrors.invalid, `the descriptor is over ${IOS_DESCRIPTOR_MAX_BYTES} bytes`);
  const d = parseJson(bytes);
  if (!d) throw bridgeError(BridgeErrors.invalid, "the descriptor is not a JSON object");
  if (d["schemaVersion"] !== schema) throw bridgeError(BridgeErrors.invalid, `descriptor schemaVersion is ${JSON.stringify(d["schemaVersion"])}, expected "${schema}"`);
  if (d["bundleId"] !== bundleId) throw bridgeError(BridgeErrors.packageMismatch, `the descriptor names ${JSON.stringify(d["bundleId"])}, not ${bundleId}`, "app");
  const epoch = d["runtimeEpoch"];
  if (typeof epoch !== "string" || !epochPattern.test(epoch)) throw bridgeError(BridgeErrors.invalid, "the descriptor's runtimeEpoch is missing or malformed");
  if (d["ok"] !== true) throw bridgeError(BridgeErrors.notReady, `the runtime is not ready: ${typeof d["reason"] === "string" ? d["reason"] : "ok is not true"}`);
  const pid = d["processId"];
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid < 1) throw bridgeError(BridgeErrors.invalid, "the descriptor's processId is not a positive integer");
  const port = d["port"];
  if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65_535) throw bridgeError(BridgeErrors.invalid, "the descriptor's port is not 1..65535");
  return { schemaVersion: schema, bundleId, runtimeEpoch: epoch, processId: pid, port };
}

/** The reply's runtimeBinding must equal the descriptor in all five fields. */
export function checkIosBinding(body: Record<string, unknown> | undefined, r: IosRuntime): void {
  const b = body?.["runtimeBinding"] as Record<string, unknown> | undefined;
  const same = b && b["schemaVersion"] === r.schemaVersion && b["bundleId"] === r.bundleId && b["runtimeEpoch"] === r.runtimeEpoch && b["processId"] === r.processId && b["port"] === r.port;
  if (!same) throw bridgeError(BridgeErrors.identityMismatch, `the reply's runtimeBinding ${JSON.stringify(b ?? null)} does not match ${r.bundleId}@${r.runtimeEpoch} pid ${r.processId} port ${r.port}`);
}

function stateOf(d: DevicectlDevice): string {
  const c = d.connectionProperties ?? {};
  const p = d.deviceProperties ?? {};
  if (c.pairingState !== "paired") return "unauthorized";
  if (c.tunnelState !== "connected") return "offline";
  // A paired phone without developer mode or its disk image cannot be driven.
  if (p.developerModeStatus !== "enabled" || p.ddiServicesAvailable !== true) return "unavailable";
  return "device";
}

/**
 * iOS devices of this host, from devicectl: reported in the inventory as
 * their own platform (so leases and routing treat them like Android
 * phones), and the SDK and WebDriverAgent endpoints of their apps.
 */
export class IosDevices {
  private devices = new Map<string, DevicectlDevice>();
  private timer: NodeJS.Timeout | undefined;
  private warned = false;

  constructor(private readonly opts: { tool: Devicectl; watcher: DeviceWatcher; log: Logger }) {}

  start(): void {
    const tick = async () => {
      try {
        const list = await listDevices(this.opts.tool);
        this.devices = new Map(list.filter((d) => (d.hardwareProperties?.platform ?? "iOS") === "iOS").map((d) => [d.identifier, d]));
        this.opts.watcher.setExternal([...this.devices.values()].map((d) => this.report(d)));
        this.warned = false;
      } catch (err) {
        if (!this.warned) this.opts.log.warn("devicectl list devices failed; iOS devices are not reported", { error: (err as Error).message });
        this.warned = true;
      }
    };
    void tick();
    this.timer = setInterval(() => void tick(), POLL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  device(serial: string): DevicectlDevice | undefined {
    return this.devices.get(serial);
  }

  private report(d: DevicectlDevice): DeviceReport {
    const udid = d.hardwareProperties?.udid ?? d.identifier;
    return create(DeviceReportSchema, {
      serial: d.identifier,
      state: stateOf(d),
      properties: {
        platform: "ios",
        model: d.hardwareProperties?.marketingName ?? d.hardwareProperties?.productType ?? "",
        manufacturer: "Apple",
        androidVersion: "",
        serialno: udid,
        physicalId: `ios-${udid}`,
        identityStatus: "ok",
      },
    });
  }

  sdkEndpoint(serial: string, bundleId: string, timeoutMs: number): Promise<IosEndpoint> {
    return this.endpoint(serial, bundleId, IOS_SDK_DESCRIPTOR, IOS_SDK_SCHEMA, "/v1/status", timeoutMs);
  }

  wdaEndpoint(serial: string, runnerBundleId: string, timeoutMs: number): Promise<IosEndpoint> {
    return this.endpoint(serial, runnerBundleId, IOS_WDA_DESCRIPTOR, IOS_WDA_SCHEMA, "/status", timeoutMs);
  }

  /**
   * Copies the descriptor out of exactly this device's container for this
   * bundle, validates it, and proves the binding with a status request over
   * the device's developer tunnel. No URL, port scan or hostname fallback.
   */
  private async endpoint(serial: string, bundleId: string, file: string, schema: string, statusPath: string, timeoutMs: number): Promise<IosEndpoint> {
    if (!bundlePattern.test(bundleId)) throw bridgeError(BridgeErrors.invalid, `"${bundleId}" is not a bundle id`, "app");
    const budget = new Budget(timeoutMs);
    const d = this.devices.get(serial);
    if (!d) throw bridgeError(BridgeErrors.discoveryFailed, `no iOS device ${serial} on this agent`, "target.serial");
    if (stateOf(d) !== "device") throw bridgeError(BridgeErrors.discoveryFailed, `iOS device ${serial} is ${stateOf(d)}: it needs a connected developer tunnel, developer mode and its disk image`);
    let bytes: Buffer;
    try {
      bytes = await copyFromAppContainer(this.opts.tool, d.identifier, bundleId, file, IOS_DESCRIPTOR_MAX_BYTES, budget.remaining());
    } catch (err) {
      if (err instanceof RangeError) throw bridgeError(BridgeErrors.invalid, err.message);
      throw bridgeError(BridgeErrors.discoveryFailed, `copying ${file} from ${bundleId} on ${serial} failed: ${(err as Error).message}`);
    }
    const runtime = validateIosDescriptor(bytes, schema, bundleId);
    const host = d.connectionProperties?.tunnelIPAddress;
    if (!host) throw bridgeError(BridgeErrors.discoveryFailed, `iOS device ${serial} reports no tunnel address`);
    let res;
    try {
      res = await sdkGet(host, runtime.port, statusPath, iosIdentityHeaders(runtime), budget.slice(CHECK_TIMEOUT_MS));
    } catch (err) {
      throw bridgeError(BridgeErrors.notReady, `nothing answers at ${host}:${runtime.port} (${(err as Error).message})`);
    }
    const body = parseJson(res.body);
    if (res.status !== 200) {
      if (res.status === 409 || res.status === 400) throw bridgeError(BridgeErrors.identityMismatch, `the runtime refused the identity: ${String(body?.["error"] ?? res.status)}`);
      throw bridgeError(BridgeErrors.notReady, `status answered ${res.status}`);
    }
    checkIosBinding(body, runtime);
    // Answering is not being ready: only an explicit boolean ok:true verifies the endpoint.
    if (body?.["ok"] !== true) {
      const why = typeof body?.["error"] === "string" ? `: ${body["error"]}` : "";
      throw bridgeError(BridgeErrors.notReady, `${statusPath} answered ${body && "ok" in body ? `ok: ${JSON.stringify(body["ok"])}` : "without a boolean ok"}${why}; the runtime is not ready`);
    }
    return { ...runtime, host, verifiedAtMs: Date.now() };
  }
}
