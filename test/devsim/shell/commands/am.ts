import type { ShellCommand } from "../command.js";

/** `am start [-W] [-S] -n PKG/ACT`, `am force-stop PKG`, `am kill PKG`, `am broadcast -a ACTION`. */
export const amCommand: ShellCommand = async (ctx) => {
  const [sub, ...rest] = ctx.args;
  const device = ctx.device;
  if (sub === "start" || sub === "start-activity") {
    const n = rest.indexOf("-n");
    const component = n >= 0 ? rest[n + 1] : undefined;
    if (!component || !component.includes("/")) {
      await ctx.stderr.write("Error: Activity not started, unable to resolve Intent { flg=0x10000000 }\n");
      return 1;
    }
    const [packageName, activity] = component.split("/") as [string, string];
    const full = activity.startsWith(".") ? `${packageName}${activity}` : activity;
    await ctx.stdout.write(`Starting: Intent { cmp=${component} }\n`);
    if (rest.includes("-S")) device.screen.forceStop(packageName);
    const error = device.screen.start(packageName, activity);
    if (error) {
      await ctx.stderr.write(`${error}\n`);
      return 1;
    }
    if (rest.includes("-W")) {
      await ctx.stdout.write(`Status: ok\nLaunchState: COLD\nActivity: ${packageName}/${full}\nTotalTime: 412\nWaitTime: 418\nComplete\n`);
    }
    return 0;
  }
  if (sub === "force-stop" || sub === "kill") {
    const packageName = rest.find((arg) => !arg.startsWith("-"));
    if (!packageName) {
      await ctx.stderr.write("Exception occurred while executing: Argument expected after \"force-stop\"\n");
      return 255;
    }
    const process = device.appProcess(packageName);
    if (process) device.processes.exit(process.pid);
    device.screen.forceStop(packageName);
    return 0;
  }
  if (sub === "broadcast") {
    // Delivered to nobody: the simulator has no receivers; what a shell sees is the same.
    const a = rest.indexOf("-a");
    await ctx.stdout.write(`Broadcasting: Intent { ${a >= 0 ? `act=${rest[a + 1] ?? ""} ` : ""}flg=0x400000 }\nBroadcast completed: result=0\n`);
    return 0;
  }
  await ctx.stderr.write(`Unknown command: ${sub ?? ""}\n`);
  return 255;
};
