import type { ShellCommand } from "../command.js";

/** `wm size [WxH|reset]`, `wm density [DPI|reset]`. */
export const wmCommand: ShellCommand = async (ctx) => {
  const display = ctx.device.display;
  const [sub, value] = ctx.args;
  if (sub === "size") {
    if (value === undefined) {
      const lines = [`Physical size: ${display.physical.width}x${display.physical.height}`];
      if (display.overrideSize) lines.push(`Override size: ${display.overrideSize.width}x${display.overrideSize.height}`);
      await ctx.stdout.write(`${lines.join("\n")}\n`);
      return 0;
    }
    const match = /^(\d+)x(\d+)$/.exec(value);
    if (value !== "reset" && !match) {
      await ctx.stderr.write(`Error: bad size ${value}\n`);
      return 255;
    }
    if (!ctx.device.adbdRoot && ctx.caller.uid !== 2000 && ctx.caller.uid !== 0) return denied(ctx);
    display.overrideSize = match ? { width: Number(match[1]), height: Number(match[2]) } : undefined;
    ctx.device.screen.changed();
    return 0;
  }
  if (sub === "density") {
    if (value === undefined && ctx.device.faults.current.densityUnavailable) {
      await ctx.stderr.write("Error: Could not access the Window Manager. Is the system running?\n");
      return 255;
    }
    if (value === undefined) {
      const lines = [`Physical density: ${display.physicalDensity}`];
      if (display.overrideDensity !== undefined) lines.push(`Override density: ${display.overrideDensity}`);
      await ctx.stdout.write(`${lines.join("\n")}\n`);
      return 0;
    }
    if (value !== "reset" && !/^\d+$/.test(value)) {
      await ctx.stderr.write(`Error: bad density ${value}\n`);
      return 255;
    }
    display.overrideDensity = value === "reset" ? undefined : Number(value);
    ctx.device.screen.changed();
    return 0;
  }
  await ctx.stderr.write(sub === undefined ? "Window manager (window) commands:\n  size [reset|WxH]\n  density [reset|DENSITY]\n" : `Unknown command: ${sub}\n`);
  return sub === undefined ? 0 : 255;
};

async function denied(ctx: Parameters<ShellCommand>[0]): Promise<number> {
  await ctx.stderr.write("Security exception: Must hold permission android.permission.WRITE_SECURE_SETTINGS\n");
  return 255;
}
