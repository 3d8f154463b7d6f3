import type { ShellCommand } from "../command.js";

export const pwdCommand: ShellCommand = async (ctx) => {
  await ctx.stdout.write(`${ctx.cwd}\n`);
  return 0;
};
