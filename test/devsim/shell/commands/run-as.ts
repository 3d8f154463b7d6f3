import { appCaller } from "../../fs/caller.js";
import type { ShellCommand } from "../command.js";

/**
 * `run-as PKG [--user N] CMD ARGS…`: runs as the app's uid in its data
 * directory — only for installed, debuggable apps, with run-as's own words
 * for the refusals.
 */
export const runAsCommand: ShellCommand = async (ctx) => {
  const args = [...ctx.args];
  const packageName = args.shift();
  if (packageName === undefined) {
    await ctx.stderr.write("usage: run-as <package-name> [--user <uid>] <command> [<args>]\n");
    return 1;
  }
  if (args[0] === "--user") args.splice(0, 2);
  const pkg = ctx.device.packages.get(packageName);
  if (!pkg) {
    await ctx.stderr.write(`run-as: unknown package: ${packageName}\n`);
    return 1;
  }
  if (!pkg.debuggable || ctx.device.faults.current.runAsDenied) {
    await ctx.stderr.write(`run-as: package not debuggable: ${packageName}\n`);
    return 1;
  }
  const overrides = { caller: appCaller(pkg.uid), cwd: `/data/data/${packageName}` };
  if (args.length === 0) return ctx.runCommand(["sh"], overrides);
  return ctx.runCommand(args, overrides);
};
