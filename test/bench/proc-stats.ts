import { readFileSync } from "node:fs";

// Linux clock ticks per second for /proc/<pid>/stat (USER_HZ, 100 on every
// mainstream kernel configuration).
const CLK_TCK = 100;

/** CPU seconds (user + system) a process has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the ")" that ends the command name; utime is 14th, stime 15th overall.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/** Peak and current resident set size of a process, in MiB. */
export function memoryMiB(pid: number): { peakRss: number; rss: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? NaN);
  return { peakRss: kb("VmHWM") / 1024, rss: kb("VmRSS") / 1024 };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
}

/** Clock ticks (user, system) a process has used so far. */
function cpuTicks(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { user: Number(fields[11]), system: Number(fields[12]) };
}

/** A process's CPU over the next `ms`, as fractions of one core: user, system (the kernel's work for it). */
export async function cpuOver(pid: number, ms: number): Promise<{ user: number; system: number }> {
  const a = cpuTicks(pid);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const b = cpuTicks(pid);
  const s = (performance.now() - t0) / 1000;
  return { user: (b.user - a.user) / CLK_TCK / s, system: (b.system - a.system) / CLK_TCK / s };
}
