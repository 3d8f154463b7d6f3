import { AID, ROOT } from "./caller.js";
import type { FileSystem } from "./file-system.js";

/**
 * The directories of a stock, non-rooted phone that farm and adb touch, with
 * Android's owners and modes: shell can write /data/local/tmp and shared
 * storage, can traverse but not list /data and /data/data, and cannot enter
 * an app's private directory.
 */
export function populateDefaultLayout(fs: FileSystem, bootId: () => string): void {
  const dir = (path: string, mode: number, uid = 0, gid = uid) => fs.mkdir(path, ROOT, { mode, uid, gid });
  dir("/system", 0o755);
  dir("/system/bin", 0o755);
  dir("/vendor", 0o755);
  dir("/proc", 0o555);
  dir("/proc/sys", 0o555);
  dir("/proc/sys/kernel", 0o555);
  dir("/proc/sys/kernel/random", 0o555);
  fs.addSpecial("/proc/sys/kernel/random/boot_id", "dynamic", () => Buffer.from(`${bootId()}\n`));
  dir("/dev", 0o755);
  fs.addSpecial("/dev/null", "null");
  dir("/data", 0o771, AID.SYSTEM);
  dir("/data/local", 0o751);
  dir("/data/local/tmp", 0o771, AID.SHELL);
  dir("/data/data", 0o771, AID.SYSTEM);
  dir("/data/app", 0o771, AID.SYSTEM);
  dir("/storage", 0o755);
  dir("/storage/emulated", 0o711);
  dir("/storage/emulated/0", 0o2770, 0, AID.EVERYBODY);
  for (const name of ["Alarms", "DCIM", "Download", "Movies", "Music", "Pictures", "Android"]) dir(`/storage/emulated/0/${name}`, 0o2770, 0, AID.EVERYBODY);
  dir("/storage/self", 0o755);
  fs.symlink("/storage/emulated/0", "/storage/self/primary", ROOT);
  fs.symlink("/storage/self/primary", "/sdcard", ROOT);
}
