import type { EvidenceDevice, EvidenceError } from "@farm/shared/evidence-manifest";
import type { AdbServerAddress } from "../adb-client.js";
import { shellV2 } from "../adb-shell.js";
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
  fail: (code: string, stage: string, message: string, component: string | null) => EvidenceError,
): Promise<EvidenceDevice> {
  const run = async (command: string): Promise<string | null> => {
    try {
      const r = await shellV2(deps.adb, deps.serial, command, AbortSignal.timeout(Math.max(1, Math.ceil(remaining()))));
      return r.exitCode === 0 ? r.stdout.toString("utf8") : null;
    } catch {
      return null;
    }
  };
  const props = parseGetprop((await run("getprop")) ?? "");
  const prop = (k: string, what: string): string | null => {
    const v = props[k];
    if (v === undefined || v === "") {
      fail("METADATA_UNAVAILABLE", "metadata", `${what} (${k}) could not be read`, "getprop");
      return null;
    }
    return v;
  };
  const sdk = Number.parseInt(prop("ro.build.version.sdk", "API level") ?? "", 10);
  const size = parseWmSize((await run("wm size")) ?? "");
  const density = parseWmDensity((await run("wm density")) ?? "");
  const rotation = parseRotation((await run("dumpsys input")) ?? "");
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
