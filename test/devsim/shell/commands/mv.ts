import type { ShellCommand } from "../command.js";
import { pathOf, reportFsError, splitOptions } from "./file-args.js";

/** `mv [-f] SOURCE DEST`: one rename(2), so readers see the old or the new file, never a part. */
export const mvCommand: ShellCommand = async (ctx) => {
  const { operands, bad } = splitOptions(ctx.args, "fn");
  if (bad !== undefined || operands.length !== 2) {
    await ctx.stderr.write(bad !== undefined ? `mv: Unknown option '${bad}'\n` : "mv: Needs 2 arguments\n");
    return 1;
  }
  const [from, to] = operands as [string, string];
  try {
    ctx.device.fs.rename(pathOf(ctx, from), pathOf(ctx, to), ctx.caller);
    return 0;
  } catch (error) {
    await reportFsError(ctx, from, error);
    return 1;
  }
};
