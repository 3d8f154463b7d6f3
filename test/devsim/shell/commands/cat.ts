import type { ShellCommand } from "../command.js";
import { pathOf, reportFsError } from "./file-args.js";

/** `cat [FILE|-]…`: files from the device, `-` or no argument copies stdin. */
export const catCommand: ShellCommand = async (ctx) => {
  const paths = ctx.args.length === 0 ? ["-"] : ctx.args;
  let status = 0;
  for (const path of paths) {
    if (path === "-") {
      for (let chunk = await ctx.stdin.read(); chunk; chunk = await ctx.stdin.read()) await ctx.stdout.write(chunk);
      continue;
    }
    try {
      await ctx.stdout.write(ctx.device.fs.readFile(pathOf(ctx, path), ctx.caller));
    } catch (error) {
      await reportFsError(ctx, path, error);
      status = 1;
    }
  }
  return status;
};
