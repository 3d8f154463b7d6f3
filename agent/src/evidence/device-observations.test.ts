import { describe, expect, it } from "vitest";
import { deviceTypeOf, looksLikeHierarchy, parseAwake, parseGetprop, parseLocked, parseRotation, parseWmDensity, parseWmSize } from "./device-observations.js";

describe("device observations", () => {
  it("parses getprop, wm and dumpsys output as Android prints it", () => {
    expect(parseGetprop("[ro.product.model]: [Pixel 7]\n[ro.kernel.qemu]: [0]\r\n[empty]: []\n")).toEqual({ "ro.product.model": "Pixel 7", "ro.kernel.qemu": "0", empty: "" });
    expect(parseWmSize("Physical size: 1080x2400\n")).toEqual({ width: 1080, height: 2400 });
    expect(parseWmSize("Physical size: 1080x2400\nOverride size: 720x1600\n")).toEqual({ width: 720, height: 1600 });
    expect(parseWmSize("garbage")).toBeNull();
    expect(parseWmDensity("Physical density: 420\nOverride density: 320")).toBe(320);
    expect(parseWmDensity("Physical density: 420")).toBe(420);
    expect(parseRotation("  Viewport INTERNAL: displayId=0, orientation=1, logicalFrame=[0, 0, 2400, 1080]\n  SurfaceOrientation: 3")).toBe(1);
    expect(parseRotation("      SurfaceOrientation: 2")).toBe(2);
    expect(parseRotation("nothing")).toBeNull();
    expect(parseAwake("  mWakefulness=Asleep")).toBe(false);
    expect(parseAwake("  mWakefulness=Awake")).toBe(true);
    expect(parseLocked("  mKeyguardShowing=true mKeyguardOccluded=false")).toBe(true);
    expect(parseLocked("nothing")).toBeNull();
  });

  it("derives the device type as the contract says", () => {
    expect(deviceTypeOf("1", null)).toBe("emulator");
    expect(deviceTypeOf("0", "1")).toBe("emulator");
    expect(deviceTypeOf("0", null)).toBe("physical");
    expect(deviceTypeOf(null, null)).toBe("unknown");
  });

  it("recognises a whole UIAutomator document", () => {
    expect(looksLikeHierarchy("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\"><node/></hierarchy>")).toBe(true);
    expect(looksLikeHierarchy("<?xml version='1.0'?><hierarchy rotation=\"0\"><node/>")).toBe(false);
    expect(looksLikeHierarchy("ERROR: null root node returned by UiTestAutomationBridge.")).toBe(false);
  });
});
