import { createHash } from "node:crypto";
import type { ShellCommand } from "../command.js";
import { pathOf, reportFsError } from "./file-args.js";

/** toybox sha256sum: `HASH  NAME` per file, `-` (or nothing) hashes stdin. */
export const sha256sumCommand: ShellCommand = async (ctx) => {
  const operands = ctx.args.filter((arg) => arg !== "-b");
  let status = 0;
  for (const operand of operands.length === 0 ? ["-"] : operands) {
    const hash = createHash("sha256");
    try {
      if (operand === "-") {
        for (let chunk = await ctx.stdin.read(); chunk; chunk = await ctx.stdin.read()) hash.update(chunk);
      } else {
        hash.update(ctx.device.fs.readFile(pathOf(ctx, operand), ctx.caller));
      }
      await ctx.stdout.write(`${hash.digest("hex")}  ${operand}\n`);
    } catch (error) {
      await reportFsError(ctx, operand, error);
      status = 1;
    }
  }
  return status;
};
