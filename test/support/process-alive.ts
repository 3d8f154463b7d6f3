import { readFileSync } from "node:fs";

/**
 * Running: in the process table and not a zombie. A process whose parent has
 * not reaped it yet (an orphan's new parent may take its time) still answers
 * signal 0, so this reads its state instead.
 */
export function processAlive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "")[0] !== "Z";
  } catch {
    return false;
  }
}
