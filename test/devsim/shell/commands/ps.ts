import type { SimProcess } from "../../device/process-table.js";
import { userName } from "../../fs/caller.js";
import type { ShellCommand } from "../command.js";

type Column = { header: string; width: number; left?: boolean; value: (p: SimProcess) => string };

const pad2 = (n: number) => String(n).padStart(2, "0");
const clock = (ms: number) => {
  const d = new Date(ms);
  return `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())}`;
};
const elapsed = (ms: number) => {
  const s = Math.max(0, Math.floor((Date.now() - ms) / 1000));
  return `${pad2(Math.floor(s / 60))}:${pad2(s % 60)}`;
};

const COLUMNS: Record<string, Column> = {
  PID: { header: "PID", width: 5, value: (p) => String(p.pid) },
  PPID: { header: "PPID", width: 5, value: (p) => String(p.ppid) },
  USER: { header: "USER", width: 12, left: true, value: (p) => userName(p.uid) },
  UID: { header: "UID", width: 5, value: (p) => String(p.uid) },
  NAME: { header: "NAME", width: 0, left: true, value: (p) => p.name },
  CMD: { header: "CMD", width: 0, left: true, value: (p) => p.name },
  COMM: { header: "COMM", width: 0, left: true, value: (p) => p.name.slice(0, 15) },
  ARGS: { header: "ARGS", width: 0, left: true, value: (p) => p.args },
  CMDLINE: { header: "CMDLINE", width: 0, left: true, value: (p) => p.args },
  STIME: { header: "STIME", width: 8, value: (p) => clock(p.startTime) },
  ETIME: { header: "ELAPSED", width: 8, value: (p) => elapsed(p.startTime) },
  ELAPSED: { header: "ELAPSED", width: 8, value: (p) => elapsed(p.startTime) },
  TIME: { header: "TIME", width: 8, value: () => "00:00:00" },
  S: { header: "S", width: 1, value: () => "S" },
  STAT: { header: "S", width: 1, value: () => "S" },
  VSZ: { header: "VSZ", width: 8, value: (p) => String(10_000 + ((p.pid * 7919) % 90_000)) },
  RSS: { header: "RSS", width: 6, value: (p) => String(2_000 + ((p.pid * 104_729) % 40_000)) },
  WCHAN: { header: "WCHAN", width: 6, left: true, value: () => "0" },
  ADDR: { header: "ADDR", width: 1, value: () => "0" },
};
const DEFAULT = ["USER", "PID", "PPID", "VSZ", "RSS", "WCHAN", "ADDR", "S", "NAME"];

/** toybox ps: `-A` all processes (else only the caller's), `-o COL,…`, `-p PID,…`, trailing NAMEs filter. */
export const psCommand: ShellCommand = async (ctx) => {
  let columns = DEFAULT;
  let pids: Set<number> | undefined;
  let all = false;
  const names: string[] = [];
  for (let index = 0; index < ctx.args.length; index++) {
    const arg = ctx.args[index]!;
    if (arg === "-o" || arg === "-O") {
      const spec = (ctx.args[++index] ?? "").split(",").map((c) => c.split("=")[0]!.toUpperCase()).filter(Boolean);
      const unknown = spec.find((c) => !COLUMNS[c]);
      if (unknown) {
        await ctx.stderr.write(`ps: bad -o ${unknown.toLowerCase()}\n`);
        return 1;
      }
      columns = arg === "-O" ? ["PID", ...spec, "S", "NAME"] : spec;
    } else if (arg === "-p") {
      pids = new Set((ctx.args[++index] ?? "").split(",").map(Number));
      all = true;
    } else if (/^-[Aaefwlt]+$/.test(arg)) {
      all ||= /[Ae]/.test(arg);
    } else if (!arg.startsWith("-")) {
      names.push(arg);
      all = true;
    }
  }
  const selected = ctx.device.processes
    .list()
    .filter((p) => all || p.uid === ctx.caller.uid)
    .filter((p) => !pids || pids.has(p.pid))
    .filter((p) => names.length === 0 || names.includes(p.name));
  const cols = columns.map((name) => COLUMNS[name]!);
  const cell = (col: Column, text: string, last: boolean) => (last ? text : col.left ? text.padEnd(col.width) : text.padStart(col.width));
  const line = (texts: string[]) => texts.map((t, i) => cell(cols[i]!, t, i === texts.length - 1)).join(" ").trimEnd();
  const rows = [line(cols.map((c) => c.header)), ...selected.map((p) => line(cols.map((c) => c.value(p))))];
  await ctx.stdout.write(`${rows.join("\n")}\n`);
  return pids && selected.length === 0 ? 1 : 0;
};

/** `pidof NAME…` */
export const pidofCommand: ShellCommand = async (ctx) => {
  const pids = ctx.device.processes
    .list()
    .filter((p) => ctx.args.includes(p.name))
    .map((p) => p.pid)
    .reverse();
  if (pids.length === 0) return 1;
  await ctx.stdout.write(`${pids.join(" ")}\n`);
  return 0;
};
