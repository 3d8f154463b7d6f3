import type { ShellCommand } from "../command.js";

/**
 * `monkey -p PKG -c android.intent.category.LAUNCHER 1`: the usual way to
 * start an app by package alone (its launcher activity). Other event
 * counts and options are not simulated.
 */
export const monkeyCommand: ShellCommand = async (ctx) => {
  const p = ctx.args.indexOf("-p");
  const packageName = p >= 0 ? ctx.args[p + 1] : undefined;
  if (!packageName) {
    await ctx.stderr.write("** Error: no package given (-p PKG)\n");
    return 1;
  }
  await ctx.stdout.write(ctx.args.map((a) => `  bash arg: ${a}\n`).join(""));
  // No launcher activity (or no such package): what monkey says when it finds nothing to start.
  if (!ctx.device.packages.get(packageName)?.model || ctx.device.screen.start(packageName) !== undefined) {
    await ctx.stdout.write("** No activities found to run, monkey aborted.\n");
    return 252;
  }
  await ctx.stdout.write("Events injected: 1\n## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)\n");
  return 0;
};
