import { refusal } from "@farm/shared/testing/refusal";
import { describe, expect, it } from "vitest";
import { checkAdbService, MAX_SERVICE_BYTES, serviceKind } from "./service-names.js";

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
    "localabstract:chrome_devtools_remote",
    "abb:package\0list",
    "abb_exec:package\0path\0com.example",
    "reboot:",
    "reboot:bootloader",
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
    ["SHELL:ls", /not an adb device service/],
    ["shell:echo é", /ASCII/],
    [`shell:${"x".repeat(MAX_SERVICE_BYTES)}`, /at most 1024 bytes/],
  ])("refuses %j", (service, message) => {
    const r = refusal(() => checkAdbService(service));
    expect(r).toMatchObject({ code: "INVALID_ARGUMENT", field: "service" });
    expect(r?.message).toMatch(message);
  });

  it("names the kind of a service without its command (for logs)", () => {
    expect(serviceKind("shell,v2,raw:cat /data/secret")).toBe("shell,");
    expect(serviceKind("track-app")).toBe("track-app");
    expect(serviceKind("host:version")).toBe("?");
  });
});
