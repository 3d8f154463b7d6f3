import type { ShellCommand } from '../command.js';

/** `cat [FILE|-]…`: files from the device, `-` or no argument copies stdin. */
export const catCommand: ShellCommand = async (ctx) => {
  const paths = ctx.args.length === 0 ? ['-'] : ctx.args;
  let status = 0;
  for (const path of paths) {
    if (path === '-') {
      for (let chunk = await ctx.stdin.read(); chunk; chunk = await ctx.stdin.read()) await ctx.stdout.write(chunk);
      continue;
    }
    const content = ctx.device.readFile(path);
    if (content === undefined) {
      await ctx.stderr.write(`cat: ${path}: No such file or directory\n`);
      status = 1;
      continue;
    }
    await ctx.stdout.write(content);
  }
  return status;
};
