import { SIGNALS, parseSignal } from "../../device/process-table.js";
import type { ShellCommand } from "../command.js";

/** `kill [-SIG | -s SIG | -n N] PID…`, `kill -l`. */
export const killCommand: ShellCommand = async (ctx) => {
  const args = [...ctx.args];
  if (args[0] === "-l") {
    await ctx.stdout.write(`${Object.entries(SIGNALS).map(([name, n]) => `${n}) SIG${name}`).join("\n")}\n`);
    return 0;
  }
  let signal = 15;
  if (args[0] === "-s" || args[0] === "-n") {
    args.shift();
    const parsed = parseSignal(args.shift() ?? "");
    if (parsed === undefined) return badSignal(ctx);
    signal = parsed;
  } else if (args[0]?.startsWith("-") && args[0] !== "--") {
    const parsed = parseSignal(args.shift()!.slice(1));
    if (parsed === undefined) return badSignal(ctx);
    signal = parsed;
  }
  if (args[0] === "--") args.shift();
  if (args.length === 0) {
    await ctx.stderr.write("kill: Needs 1 argument\n");
    return 1;
  }
  let status = 0;
  for (const arg of args) {
    const error = /^[0-9]+$/.test(arg) ? ctx.device.processes.kill(Number(arg), signal, ctx.caller) : "No such process";
    if (error) {
      await ctx.stderr.write(`/system/bin/sh: kill: ${arg}: ${error}\n`);
      status = 1;
    }
  }
  return status;
};

async function badSignal(ctx: Parameters<typeof killCommand>[0]): Promise<number> {
  await ctx.stderr.write("/system/bin/sh: kill: unknown signal\n");
  return 1;
}
