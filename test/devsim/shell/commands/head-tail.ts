import type { ShellCommand } from "../command.js";

async function lines(ctx: Parameters<ShellCommand>[0]): Promise<{ lines: string[]; count: number }> {
  const args = [...ctx.args];
  let count = 10;
  const n = args.findIndex((arg) => arg === "-n" || /^-n?\d+$/.test(arg));
  if (n >= 0) {
    const arg = args[n]!;
    count = Number(arg === "-n" ? args[n + 1] : arg.replace(/^-n?/, ""));
    args.splice(n, arg === "-n" ? 2 : 1);
  }
  let text = "";
  if (args.length === 0) { for (let chunk = await ctx.stdin.read(); chunk; chunk = await ctx.stdin.read()) text += chunk.toString("utf8"); }
  else for (const file of args) text += ctx.device.readFile(file.startsWith("/") ? file : `${ctx.cwd}/${file}`)?.toString("utf8") ?? "";
  const all = text.split("\n");
  if (all[all.length - 1] === "") all.pop();
  return { lines: all, count };
}

/** `head [-n N] [FILE]` */
export const headCommand: ShellCommand = async (ctx) => {
  const { lines: all, count } = await lines(ctx);
  const out = all.slice(0, count);
  if (out.length > 0) await ctx.stdout.write(`${out.join("\n")}\n`);
  return 0;
};

/** `tail [-n N] [FILE]` */
export const tailCommand: ShellCommand = async (ctx) => {
  const { lines: all, count } = await lines(ctx);
  const out = count === 0 ? [] : all.slice(-count);
  if (out.length > 0) await ctx.stdout.write(`${out.join("\n")}\n`);
  return 0;
};
