import { invalidArgument } from "@farm/shared/errors";

/** The longest service request passed on (adb's own limit for a request is 4 KiB; tunnelled ones are shell commands at most). */
export const MAX_SERVICE_BYTES = 1024;

/**
 * Device services a local adb server opens on a device (adbd's services).
 * Host requests (`host:`, `host-serial:`...) are the tunnel's own business
 * and never reach the agent's adb server: they could act on other phones.
 */
const DEVICE_SERVICE_PREFIXES = [
  "shell:",
  "shell,", // shell v2 with options: "shell,v2,raw:ls"
  "exec:",
  "sync:",
  "framebuffer:",
  "jdwp:",
  // What `adb forward` opens for each connection: a socket on the phone itself.
  "tcp:",
  "localabstract:",
  "localreserved:",
  "localfilesystem:",
  "abb:",
  "abb_exec:",
  "reboot:",
  "remount:",
  "root:",
  "unroot:",
  "sink:",
  "source:",
  "dev:",
] as const;

const DEVICE_SERVICES_EXACT = new Set(["track-jdwp", "track-app"]);

/**
 * Refused on purpose. `reverse:` would have the agent's adb server connect
 * the phone to ports on the lab host's own loopback (the agent, the adb
 * server, other phones' forwards); `tcpip:`/`usb:` restart adbd on another
 * transport, taking the tunnel's serial away from the farm.
 */
const REFUSED = [
  ["reverse:", "adb reverse is not tunnelled: it would connect the phone to the lab host's own ports"],
  ["tcpip:", "adb tcpip is not tunnelled: it moves the phone off the serial the farm reaches it by"],
  ["usb:", "adb usb is not tunnelled: it moves the phone off the serial the farm reaches it by"],
] as const;

/** The service kind for logs ("shell:", "track-jdwp"): never the command, which may hold secrets. */
export function serviceKind(service: string): string {
  if (DEVICE_SERVICES_EXACT.has(service)) return service;
  return DEVICE_SERVICE_PREFIXES.find((p) => service.startsWith(p)) ?? "?";
}

/**
 * Refuses (INVALID_ARGUMENT, field `service`) anything but a device service
 * a local adb server would open on a device, before the device is touched.
 */
export function checkAdbService(service: string): void {
  if (service === "") throw invalidArgument("service", "an adb service is required");
  // NUL is allowed: abb and abb_exec separate their arguments with it.
  if (/[^\x00-\x7f]/.test(service)) {
    // The adb request is framed by its length in characters (adb-service.ts),
    // so a multi-byte character would cut the request short and leak its
    // tail into the stream as input to the device.
    throw invalidArgument("service", "an adb service must be ASCII");
  }
  if (Buffer.byteLength(service, "utf8") > MAX_SERVICE_BYTES) throw invalidArgument("service", `an adb service is at most ${MAX_SERVICE_BYTES} bytes`);
  for (const [prefix, why] of REFUSED) if (service.startsWith(prefix)) throw invalidArgument("service", why);
  if (DEVICE_SERVICES_EXACT.has(service) || DEVICE_SERVICE_PREFIXES.some((p) => service.startsWith(p))) return;
  const shown = JSON.stringify(service.length > 40 ? `${service.slice(0, 40)}…` : service);
  throw invalidArgument(
    "service",
    service.startsWith("host") ? `adb host requests are not tunnelled (${shown})` : `${shown} is not an adb device service this tunnel opens`,
  );
}
