import type { ShellCommand } from "../command.js";

/** `getprop` lists `[key]: [value]` lines; `getprop KEY [DEFAULT]` prints one value (empty line if unset). */
export const getpropCommand: ShellCommand = async (ctx) => {
  const [key, fallback] = ctx.args;
  if (key === undefined) {
    const lines = ctx.device.props.entries().map(([k, v]) => `[${k}]: [${v}]\n`);
    await ctx.stdout.write(lines.join(""));
    return 0;
  }
  await ctx.stdout.write(`${ctx.device.props.get(key) ?? fallback ?? ""}\n`);
  return 0;
};

/** `setprop KEY VALUE`; read-only (ro.*) properties that are already set cannot change. */
export const setpropCommand: ShellCommand = async (ctx) => {
  if (ctx.args.length !== 2) {
    await ctx.stderr.write(`setprop: Need 2 arguments\n`);
    return 1;
  }
  const [key, value] = ctx.args as [string, string];
  if (!ctx.device.props.trySet(key, value)) {
    await ctx.stderr.write(`setprop: failed to set property '${key}' to '${value}'\nSee dmesg for error reason.\n`);
    return 1;
  }
  return 0;
};
