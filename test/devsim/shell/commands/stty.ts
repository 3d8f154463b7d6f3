import type { ShellCommand } from "../command.js";

/** `stty size`: the terminal's rows and columns, as toybox prints them. */
export const sttyCommand: ShellCommand = async (ctx) => {
  if (!ctx.terminal) {
    await ctx.stderr.write("stty: standard input: Not a typewriter\n");
    return 1;
  }
  if (ctx.args.length === 1 && ctx.args[0] === "size") {
    await ctx.stdout.write(`${ctx.terminal.rows} ${ctx.terminal.cols}\n`);
    return 0;
  }
  await ctx.stderr.write("stty: only \"stty size\" is simulated\n");
  return 1;
};
