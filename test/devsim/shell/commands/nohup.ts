import type { ShellCommand } from "../command.js";

/**
 * `nohup CMD [ARG…]`: runs CMD immune to the host hanging up. The shell
 * gives a background job started this way a life of its own (see
 * Shell.startJob); in the foreground it simply runs CMD.
 */
export const nohupCommand: ShellCommand = async (ctx) => {
  if (ctx.args.length === 0) {
    await ctx.stderr.write("nohup: Needs 1 argument\n");
    return 1;
  }
  return ctx.runCommand(ctx.args);
};
