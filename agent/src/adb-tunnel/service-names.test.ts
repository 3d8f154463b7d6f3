import { refusal } from "@farm/shared/testing/refusal";
import { describe, expect, it } from "vitest";
import { checkAdbService, MAX_SERVICE_BYTES, refusalOf, serviceKind } from "./service-names.js";

describe("adb service names a tunnel opens", () => {
  it.each([
    "shell:",
    "shell:echo hi",
    "shell,v2,raw:ls -l /sdcard",
    "shell,v2,TERM=xterm,pty:",
    "exec:cat /proc/version",
    "sync:",
    "framebuffer:",
    "jdwp:1234",
    "track-jdwp",
    "track-app",
    "tcp:8080",
    // The phone's (or emulator's) own loopback, in adbd's old (PORT:HOST) and new (HOST:PORT) order.
    "tcp:localhost:8080",
    "tcp:127.0.0.1:8080",
    "tcp:8080:127.0.0.1",
    "tcp:[::1]:8080",
    "tcp:::1:8080",
    "localabstract:chrome_devtools_remote",
    "abb:package\0list",
    "abb_exec:package\0path\0com.example",
    "reboot:",
    "reboot:userspace",
    "remount:",
    "root:",
    "unroot:",
    "sink:1024",
    "source:1024",
    "dev:/dev/null",
    "shell:printf 'a\\tb\\n'\nexit 3",
    `shell:${"x".repeat(MAX_SERVICE_BYTES - "shell:".length)}`,
  ])("allows %j", (service) => {
    expect(refusal(() => checkAdbService(service))).toBeNull();
  });

  it.each([
    ["host:version", /host requests/],
    ["host:transport:emulator-5554", /host requests/],
    ["host-serial:emulator-5554:get-state", /host requests/],
    ["host:kill", /host requests/],
    ["", /required/],
    ["shell", /not an adb device service/],
    ["shellx:ls", /not an adb device service/],
    ["track-jdwp2", /not an adb device service/],
    ["reverse:forward:tcp:8080;tcp:8080", /lab host's own ports/],
    ["tcpip:5555", /moves the phone off/],
    ["usb:", /moves the phone off/],
    ["tcpx:8080", /not an adb device service/],
    // Reboots that leave the phone where the farm cannot reach it over adb.
    ["reboot:bootloader", /leaves the phone in bootloader/],
    ["reboot:recovery", /leaves the phone in recovery/],
    ["reboot:sideload", /leaves the phone in sideload/],
    ["reboot:sideload-auto-reboot", /leaves the phone in sideload-auto-reboot/],
    ["reboot:fastboot", /leaves the phone in fastboot/],
    ["reboot:edl", /leaves the phone in edl/],
    ["reboot:download", /leaves the phone in download/],
    ["reboot:USERSPACE", /leaves the phone in USERSPACE/],
    // Sockets off the phone: on an emulator 10.0.2.2 is the lab host's own loopback; on a phone, the lab's network.
    ["tcp:10.0.2.2:8080", /only to the phone's own loopback/],
    ["tcp:8080:10.0.2.2", /only to the phone's own loopback/],
    ["tcp:10.0.3.2:5037", /only to the phone's own loopback/],
    ["tcp:192.168.1.10:22", /only to the phone's own loopback/],
    ["tcp:127.0.0.1.example.com:80", /only to the phone's own loopback/],
    ["tcp:localhost.example.com:80", /only to the phone's own loopback/],
    ["tcp:[fe80::1]:80", /only to the phone's own loopback/],
    ["tcp:", /only to the phone's own loopback/],
    ["tcp:80:", /only to the phone's own loopback/],
    ["tcp:abc", /only to the phone's own loopback/],
    ["SHELL:ls", /not an adb device service/],
    ["shell:echo é", /ASCII/],
    [`shell:${"x".repeat(MAX_SERVICE_BYTES)}`, /at most 1024 bytes/],
  ])("refuses %j", (service, message) => {
    const r = refusal(() => checkAdbService(service));
    expect(r).toMatchObject({ code: "INVALID_ARGUMENT", field: "service" });
    expect(r?.message).toMatch(message);
  });

  it("names the rule that refused a service (for logs and metrics), and none for one it allows", () => {
    expect(refusalOf("reverse:forward:tcp:1;tcp:2")?.rule).toBe("reverse");
    expect(refusalOf("reboot:bootloader")?.rule).toBe("reboot-mode");
    expect(refusalOf("tcp:10.0.2.2:80")?.rule).toBe("tcp-host");
    expect(refusalOf("tcpip:5555")?.rule).toBe("tcpip");
    expect(refusalOf("reboot:")).toBeUndefined();
    expect(refusalOf("tcp:8080")).toBeUndefined();
    expect(refusalOf("shell:reboot bootloader")).toBeUndefined();
  });

  it("names the kind of a service without its command (for logs)", () => {
    expect(serviceKind("shell,v2,raw:cat /data/secret")).toBe("shell,");
    expect(serviceKind("track-app")).toBe("track-app");
    expect(serviceKind("host:version")).toBe("?");
  });
});
