import { readFileSync } from "node:fs";

/**
 * A host process's start identity: boot id plus its start time in clock
 * ticks (/proc/PID/stat field 22). A reused pid has another start time.
 * Null where /proc is not available.
 */
export function hostProcessStartIdentity(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    return `${boot}:${fields[19]}`;
  } catch {
    return null;
  }
}
