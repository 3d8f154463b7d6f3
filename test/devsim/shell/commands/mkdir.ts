import type { ShellCommand } from "../command.js";
import { pathOf, reportFsError, splitOptions } from "./file-args.js";

/** `mkdir [-p] [-m MODE] DIR…` */
export const mkdirCommand: ShellCommand = async (ctx) => {
  let mode: number | undefined;
  const args = [...ctx.args];
  const m = args.indexOf("-m");
  if (m >= 0) {
    mode = parseInt(args[m + 1] ?? "", 8);
    args.splice(m, 2);
  }
  const { flags, operands, bad } = splitOptions(args, "p");
  if (bad !== undefined || operands.length === 0 || (mode !== undefined && Number.isNaN(mode))) {
    await ctx.stderr.write(bad !== undefined ? `mkdir: Unknown option '${bad}'\n` : "mkdir: Needs 1 argument\n");
    return 1;
  }
  let status = 0;
  for (const operand of operands) {
    try {
      ctx.device.fs.mkdir(pathOf(ctx, operand), ctx.caller, { parents: flags.has("p"), mode: mode ?? 0o771 });
    } catch (error) {
      await reportFsError(ctx, operand, error);
      status = 1;
    }
  }
  return status;
};
