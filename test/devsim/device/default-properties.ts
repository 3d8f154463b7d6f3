import type { DeviceProfile } from "./device-profiles.js";

/**
 * The system properties a booted, non-rooted production phone reports for
 * `getprop`, derived from its profile and serial number.
 */
export function defaultProperties(profile: DeviceProfile, serialno: string): Record<string, string> {
  const p = profile;
  const fingerprint = `${p.brand}/${p.name}/${p.device}:${p.release}/${p.buildId}/${p.incremental}:user/release-keys`;
  return {
    "ro.serialno": serialno,
    "ro.boot.serialno": serialno,
    "ro.product.manufacturer": p.manufacturer,
    "ro.product.brand": p.brand,
    "ro.product.model": p.model,
    "ro.product.name": p.name,
    "ro.product.device": p.device,
    "ro.product.board": p.board,
    "ro.product.cpu.abi": p.abiList[0] ?? "arm64-v8a",
    "ro.product.cpu.abilist": p.abiList.join(","),
    "ro.product.cpu.abilist64": p.abiList.filter((abi) => abi.includes("64")).join(","),
    "ro.product.cpu.abilist32": p.abiList.filter((abi) => !abi.includes("64")).join(","),
    "ro.product.locale": "en-US",
    "ro.hardware": p.hardware,
    "ro.build.version.sdk": String(p.sdk),
    "ro.build.version.release": p.release,
    "ro.build.version.security_patch": p.securityPatch,
    "ro.build.version.incremental": p.incremental,
    "ro.build.version.codename": "REL",
    "ro.build.id": p.buildId,
    "ro.build.display.id": p.buildId,
    "ro.build.type": "user",
    "ro.build.tags": "release-keys",
    "ro.build.fingerprint": fingerprint,
    "ro.build.characteristics": "nosdcard",
    "ro.bootimage.build.fingerprint": fingerprint,
    "ro.sf.lcd_density": String(p.density),
    "ro.debuggable": "0",
    "ro.secure": "1",
    "ro.adb.secure": "1",
    "ro.boot.verifiedbootstate": "green",
    "ro.crypto.state": "encrypted",
    "init.svc.adbd": "running",
    "persist.sys.timezone": "Etc/UTC",
    "persist.sys.usb.config": "adb",
    "sys.usb.state": "adb",
    "sys.boot_completed": "1",
    "dev.bootcomplete": "1",
    "gsm.sim.state": "ABSENT",
    "net.bt.name": "Android",
    // Only emulators have these; phones leave them unset.
    ...(p.emulator ? { "ro.kernel.qemu": "1", "ro.boot.qemu": "1", "ro.build.characteristics": "emulator" } : {}),
  };
}
