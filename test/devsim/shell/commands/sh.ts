import type { ShellCommand } from "../command.js";

/** `sh -c SCRIPT`: a child shell; `sh` alone reads its script from stdin. */
export const shCommand: ShellCommand = async (ctx) => {
  if (ctx.args[0] === "-c") {
    if (ctx.args[1] === undefined) {
      await ctx.stderr.write("/system/bin/sh: -c: option requires an argument\n");
      return 1;
    }
    return ctx.runScript(ctx.args[1]);
  }
  const chunks: Buffer[] = [];
  for (let chunk = await ctx.stdin.read(); chunk; chunk = await ctx.stdin.read()) chunks.push(chunk);
  return ctx.runScript(Buffer.concat(chunks).toString("utf8"));
};
