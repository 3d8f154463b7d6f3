import { setTimeout as delay } from "node:timers/promises";
import { ExitRequest, type ShellCommand } from "../command.js";

export const trueCommand: ShellCommand = () => 0;

export const falseCommand: ShellCommand = () => 1;

export const exitCommand: ShellCommand = async (ctx) => {
  const arg = ctx.args[0];
  if (arg === undefined) throw new ExitRequest(ctx.lastStatus);
  if (!/^-?[0-9]+$/.test(arg)) {
    await ctx.stderr.write(`/system/bin/sh: exit: ${arg}: bad number\n`);
    throw new ExitRequest(1);
  }
  throw new ExitRequest(Number(arg) & 0xff);
};

/** toybox sleep: decimal seconds with an optional s/m/h/d suffix. */
export const sleepCommand: ShellCommand = async (ctx) => {
  if (ctx.args.length === 0) {
    await ctx.stderr.write("sleep: Needs 1 argument\n");
    return 1;
  }
  const units: Record<string, number> = { "": 1, s: 1, m: 60, h: 3600, d: 86400 };
  let total = 0;
  for (const arg of ctx.args) {
    const match = /^([0-9]*\.?[0-9]+)([smhd]?)$/.exec(arg);
    if (!match) {
      await ctx.stderr.write(`sleep: invalid number '${arg}'\n`);
      return 1;
    }
    total += Number(match[1]) * units[match[2] ?? ""]!;
  }
  // Rejects with an AbortError when the session ends, which stops the script.
  await delay(total * 1000, undefined, { signal: ctx.signal });
  return 0;
};
