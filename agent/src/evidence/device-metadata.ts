import type { EvidenceDevice, EvidenceError, ManifestErrorCode } from "@farm/shared/evidence-manifest";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { shellV2 } from "../adb/adb-shell.js";
import { deviceTypeOf, parseGetprop, parseRotation, parseWmDensity, parseWmSize } from "./device-observations.js";

export interface MetadataTarget {
  adb: AdbServerAddress;
  serial: string;
  physicalId: string | null;
  bootId: string | null;
  agent: { id: string; host: string; version: string };
  cliVersion: string | null;
  hierarchySource: EvidenceDevice["hierarchySource"];
  appPackage?: string | null;
}

/**
 * The manifest's device block from targeted observations (getprop, wm,
 * dumpsys input), each within what is left of the budget. Whatever cannot
 * be read is null with an error, never guessed.
 */
export async function readDeviceMetadata(
  deps: MetadataTarget,
  remaining: () => number,
  fail: (code: ManifestErrorCode, stage: string, message: string, component: string | null) => EvidenceError,
): Promise<EvidenceDevice> {
  const run = async (command: string): Promise<string | null> => {
    try {
      const r = await shellV2(deps.adb, deps.serial, command, AbortSignal.timeout(Math.max(1, Math.ceil(remaining()))));
      return r.exitCode === 0 ? r.stdout.toString("utf8") : null;
    } catch {
      return null;
    }
  };
  // Independent reads: asked at once, so a short budget is not spent waiting on each in turn.
  const [getprop, wmSize, wmDensity, input] = await Promise.all([run("getprop"), run("wm size"), run("wm density"), run("dumpsys input")]);
  const props = parseGetprop(getprop ?? "");
  const prop = (k: string, what: string): string | null => {
    const v = props[k];
    if (v === undefined || v === "") {
      fail("METADATA_UNAVAILABLE", "metadata", `${what} (${k}) could not be read`, "getprop");
      return null;
    }
    return v;
  };
  const sdk = Number.parseInt(prop("ro.build.version.sdk", "API level") ?? "", 10);
  const size = parseWmSize(wmSize ?? "");
  const density = parseWmDensity(wmDensity ?? "");
  const rotation = parseRotation(input ?? "");
  if (!size) fail("METADATA_UNAVAILABLE", "metadata", "display size (wm size) could not be read", "wm");
  if (density === null) fail("METADATA_UNAVAILABLE", "metadata", "display density (wm density) could not be read", "wm");
  if (rotation === null) fail("METADATA_UNAVAILABLE", "metadata", "display rotation (dumpsys input) could not be read", "dumpsys");
  const kernelQemu = props["ro.kernel.qemu"] ?? null;
  const bootQemu = props["ro.boot.qemu"] ?? null;
  return {
    serial: deps.serial,
    physicalId: deps.physicalId,
    agentId: deps.agent.id,
    agentHost: deps.agent.host,
    cliVersion: deps.cliVersion,
    agentVersion: deps.agent.version,
    bootId: deps.bootId,
    appPackage: deps.appPackage ?? null,
    hierarchySource: deps.hierarchySource,
    apiLevel: Number.isFinite(sdk) && sdk > 0 ? sdk : null,
    androidVersion: prop("ro.build.version.release", "Android version"),
    manufacturer: prop("ro.product.manufacturer", "manufacturer"),
    model: prop("ro.product.model", "model"),
    deviceType: deviceTypeOf(kernelQemu, bootQemu),
    deviceTypeProperties: { "ro.kernel.qemu": kernelQemu, "ro.boot.qemu": bootQemu },
    display: size ? { width: size.width, height: size.height, density, rotation } : null,
  };
}

/**
 * Whether every field the bundle contract lists as metadata was observed:
 * API level, Android version, manufacturer, model and the display's size,
 * density and rotation. Anything missing makes usable evidence partial.
 * (An unknown device type is an observation, not a missing field.)
 */
export function metadataComplete(d: EvidenceDevice): boolean {
  return (
    d.apiLevel !== null &&
    d.androidVersion !== null &&
    d.manufacturer !== null &&
    d.model !== null &&
    d.display !== null &&
    d.display.density !== null &&
    d.display.rotation !== null
  );
}
