import { create } from "@bufbuild/protobuf";
import { DevicePropertiesSchema, type DeviceProperties } from "@farm/shared/gen/farm/v1/registry_pb";
import { shellText, type AdbDeviceClient } from "../adb/adb-client.js";

/** What the agent reads from a device: all properties and the boot id. */
export interface DeviceFacts {
  props: Record<string, string>;
  bootId: string;
}

export interface DeviceIdentity {
  physicalId: string;
  identityStatus: "ok" | "duplicate";
  pinLabel: string;
}

/** Turns `getprop` output and identity into the properties farm reports. */
export function toDeviceProperties(facts: DeviceFacts, identity: DeviceIdentity): DeviceProperties {
  const { props } = facts;
  const sdk = Number.parseInt(props["ro.build.version.sdk"] ?? "", 10);
  return create(DevicePropertiesSchema, {
    model: props["ro.product.model"] ?? "",
    manufacturer: props["ro.product.manufacturer"] ?? "",
    apiLevel: Number.isFinite(sdk) && sdk > 0 ? sdk : 0,
    androidVersion: props["ro.build.version.release"] ?? "",
    abi: props["ro.product.cpu.abi"] ?? "",
    serialno: props["ro.serialno"] || props["ro.boot.serialno"] || "",
    bootId: facts.bootId,
    physicalId: identity.physicalId,
    identityStatus: identity.identityStatus,
    pinLabel: identity.pinLabel,
  });
}

/** Reads a device's properties and boot id over adb. */
export async function readDeviceFacts(device: AdbDeviceClient): Promise<DeviceFacts> {
  const props = (await device.getProperties()) as Record<string, string>;
  const bootId = (await shellText(device, "cat /proc/sys/kernel/random/boot_id")).trim();
  return { props, bootId: /^[0-9a-f-]{36}$/i.test(bootId) ? bootId : "" };
}
