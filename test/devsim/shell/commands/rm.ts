import { FsError } from "../../fs/fs-error.js";
import type { ShellCommand } from "../command.js";
import { pathOf, reportFsError, splitOptions } from "./file-args.js";

/** `rm [-f] [-r|-R] FILE…`; `rmdir DIR…` shares it. */
export const rmCommand: ShellCommand = async (ctx) => {
  const { flags, operands, bad } = splitOptions(ctx.args, "frRiv");
  if (bad !== undefined) {
    await ctx.stderr.write(`rm: Unknown option '${bad}'\n`);
    return 1;
  }
  if (operands.length === 0) {
    if (flags.has("f")) return 0;
    await ctx.stderr.write("rm: Needs 1 argument\n");
    return 1;
  }
  let status = 0;
  for (const operand of operands) {
    try {
      ctx.device.fs.remove(pathOf(ctx, operand), ctx.caller, { recursive: flags.has("r") || flags.has("R") });
    } catch (error) {
      if (flags.has("f") && error instanceof FsError && error.code === "ENOENT") continue;
      await reportFsError(ctx, operand, error);
      status = 1;
    }
  }
  return status;
};

export const rmdirCommand: ShellCommand = async (ctx) => {
  let status = 0;
  for (const operand of ctx.args) {
    try {
      ctx.device.fs.remove(pathOf(ctx, operand), ctx.caller, { dirOnly: true });
    } catch (error) {
      await reportFsError(ctx, operand, error);
      status = 1;
    }
  }
  return status;
};
