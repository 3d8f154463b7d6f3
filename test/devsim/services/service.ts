import type { DeviceState } from "../device/device-state.js";
import type { ServiceStream } from "../transport/adb-stream.js";

/** What a service may use of the device it runs on. */
export interface ServiceDevice {
  readonly state: DeviceState;
  /** adb features this device advertises (e.g. shell_v2). */
  readonly features: ReadonlySet<string>;
}

export interface ServiceRequest {
  /** Full service string from the OPEN packet, e.g. `shell,v2,raw:getprop`. */
  readonly name: string;
  readonly device: ServiceDevice;
}

/** Runs an accepted stream; when it resolves the stream is flushed and closed. */
export type ServiceRunner = (stream: ServiceStream) => Promise<void>;

/**
 * A device-side adb service (shell, exec, sync, …). `open` decides whether to
 * accept: returning undefined refuses the OPEN with CLSE(0, id), as adbd does.
 */
export interface Service {
  /** Service-name prefixes this handles, e.g. `shell:` and `shell,`. */
  readonly prefixes: readonly string[];
  open(request: ServiceRequest): ServiceRunner | undefined | Promise<ServiceRunner | undefined>;
}
