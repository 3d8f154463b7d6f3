import type { ShellCommand } from "../command.js";
import { launcherApp } from "../../screen/apps/launcher-app.js";

/**
 * `monkey -p PKG -c android.intent.category.LAUNCHER 1`: how tools start an
 * app by package alone (Appium's activateApp does this). Only that use: one
 * event, the package's launcher activity; other monkey runs are refused.
 */
export const monkeyCommand: ShellCommand = async (ctx) => {
  const p = ctx.args.indexOf("-p");
  const packageName = p >= 0 ? ctx.args[p + 1] : undefined;
  const count = ctx.args[ctx.args.length - 1];
  if (!packageName || count !== "1" || !ctx.args.includes("android.intent.category.LAUNCHER")) {
    await ctx.stderr.write("devsim: only `monkey -p PKG -c android.intent.category.LAUNCHER 1` is simulated\n");
    return 1;
  }
  const launchable = ctx.device.packages.list().some((pkg) => pkg.name === packageName && pkg.model && pkg.name !== launcherApp.packageName);
  await ctx.stdout.write("  bash arg: -p\n  bash arg: " + packageName + "\n  bash arg: -c\n  bash arg: android.intent.category.LAUNCHER\n  bash arg: 1\nargs: [-p, " + packageName + ", -c, android.intent.category.LAUNCHER, 1]\n");
  if (!launchable) {
    await ctx.stdout.write("** No activities found to run, monkey aborted.\n");
    return 252;
  }
  const error = ctx.device.screen.start(packageName);
  if (error) {
    await ctx.stderr.write(`${error}\n`);
    return 1;
  }
  await ctx.stdout.write("Events injected: 1\n## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)\n");
  return 0;
};
