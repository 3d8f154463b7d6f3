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

/** Reboots that bring the phone back to adb on the same serial: the farm sees the new boot like any other (device history). */
const REBOOT_TARGETS_ALLOWED = new Set(["", "userspace"]);

/** The phone's (or emulator's) own loopback, as adbd's socket specs name it. */
function isLoopbackHost(host: string): boolean {
  if (host === "localhost" || host === "::1" || host === "[::1]") return true;
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  return m !== null && m.slice(1).every((o) => Number(o) <= 255);
}

/**
 * `tcp:PORT` reaches a port on the phone's own loopback. adbd also takes a
 * host (`tcp:HOST:PORT`, older adbd `tcp:PORT:HOST`) and dials it from the
 * phone: on an emulator 10.0.2.2 and its other aliases are the lab host's
 * own ports (the agent, its adb server, other phones' forwards), on a
 * phone any other host is the lab's network. The agent cannot tell an
 * emulator from a phone reliably (an emulator may be adb-connected by
 * ip:port), so any host but loopback is refused for every device.
 */
function isOffPhoneTcp(service: string): boolean {
  if (!service.startsWith("tcp:")) return false;
  const spec = service.slice("tcp:".length);
  if (/^\d{1,5}$/.test(spec)) return false;
  const hostFirst = /^(.+):(\d{1,5})$/.exec(spec);
  if (hostFirst && isLoopbackHost(hostFirst[1] as string)) return false;
  const portFirst = /^(\d{1,5}):(.+)$/.exec(spec);
  if (portFirst && isLoopbackHost(portFirst[2] as string)) return false;
  return true;
}

/** What a refused service is counted and logged as (never the service itself, which may hold secrets). */
export interface ServiceRefusal {
  rule: string;
  why: string;
}

interface RefusalRule {
  rule: string;
  matches: (service: string) => boolean;
  why: (service: string) => string;
}

/**
 * Refused on purpose: services that take the phone (or the lab host) out
 * of the farm's hands. The one table for every device (README, "Remote
 * adb", says why each is refused).
 */
const REFUSED: readonly RefusalRule[] = [
  {
    // The agent's adb server would connect the phone to ports on the lab host's own loopback.
    rule: "reverse",
    matches: (s) => s.startsWith("reverse:"),
    why: () => "adb reverse is not tunnelled: it would connect the phone to the lab host's own ports",
  },
  {
    // adbd restarts on another transport, taking the tunnel's serial away from the farm.
    rule: "tcpip",
    matches: (s) => s.startsWith("tcpip:"),
    why: () => "adb tcpip is not tunnelled: it moves the phone off the serial the farm reaches it by",
  },
  {
    rule: "usb",
    matches: (s) => s.startsWith("usb:"),
    why: () => "adb usb is not tunnelled: it moves the phone off the serial the farm reaches it by",
  },
  {
    // bootloader, recovery, sideload, fastboot...: the phone stays off adb until someone at the lab brings it back.
    rule: "reboot-mode",
    matches: (s) => s.startsWith("reboot:") && !REBOOT_TARGETS_ALLOWED.has(s.slice("reboot:".length)),
    why: (s) => {
      const target = s.slice("reboot:".length, "reboot:".length + 40);
      return `adb reboot ${target} is not tunnelled: it leaves the phone in ${target} mode, where the farm cannot reach it; plain adb reboot (and reboot userspace) is allowed`;
    },
  },
  {
    rule: "tcp-host",
    matches: isOffPhoneTcp,
    why: () => "adb forward to tcp:HOST:PORT is tunnelled only to the phone's own loopback (tcp:PORT, localhost, 127.0.0.1, ::1): another host is the lab's network, or on an emulator (10.0.2.2) the lab host itself",
  },
];

/** The rule that refuses `service` on purpose, if one does. */
export function refusalOf(service: string): ServiceRefusal | undefined {
  const r = REFUSED.find((rule) => rule.matches(service));
  return r ? { rule: r.rule, why: r.why(service) } : undefined;
}

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
  const refused = refusalOf(service);
  if (refused) throw invalidArgument("service", refused.why);
  if (DEVICE_SERVICES_EXACT.has(service) || DEVICE_SERVICE_PREFIXES.some((p) => service.startsWith(p))) return;
  const shown = JSON.stringify(service.length > 40 ? `${service.slice(0, 40)}…` : service);
  throw invalidArgument(
    "service",
    service.startsWith("host") ? `adb host requests are not tunnelled (${shown})` : `${shown} is not an adb device service this tunnel opens`,
  );
}
