import type { ShellCommand } from "../command.js";
import { pathOf } from "./file-args.js";

/**
 * `test EXPR` / `[ EXPR ]`, built into mksh: the file tests (-e -f -d -s),
 * string tests (-n -z = !=), integer comparisons (-eq -ne -lt -le -gt -ge) and `!`, which scripts use to avoid running a
 * separate program. Exit 0 true, 1 false, 2 on a bad expression.
 */
export const testCommand: ShellCommand = async (ctx) => {
  let args = [...ctx.args];
  if (ctx.name === "[" || ctx.name.endsWith("/[")) {
    if (args[args.length - 1] !== "]") {
      await ctx.stderr.write("[: missing ]\n");
      return 2;
    }
    args = args.slice(0, -1);
  }
  let negate = false;
  while (args[0] === "!" && args.length > 1) {
    negate = !negate;
    args = args.slice(1);
  }
  const result = evaluate(ctx, args);
  if (result === undefined) {
    await ctx.stderr.write(`test: bad expression: ${args.join(" ")}\n`);
    return 2;
  }
  return result !== negate ? 0 : 1;
};

function evaluate(ctx: Parameters<ShellCommand>[0], args: string[]): boolean | undefined {
  if (args.length === 0) return false;
  if (args.length === 1) return args[0] !== "";
  if (args.length === 2) {
    const [op, operand = ""] = args;
    if (op === "-n") return operand !== "";
    if (op === "-z") return operand === "";
    const kind = fileKind(ctx, operand);
    switch (op) {
      case "-e":
        return kind !== undefined;
      case "-f":
        return kind?.kind === "file";
      case "-d":
        return kind?.kind === "dir";
      case "-s":
        return kind !== undefined && kind.size > 0;
      default:
        return undefined;
    }
  }
  if (args.length === 3) {
    const [a, op, b] = args;
    if (op === "=" || op === "==") return a === b;
    if (op === "!=") return a !== b;
    const compare = INTEGER_OPS[op ?? ""];
    if (compare) {
      const x = integer(a);
      const y = integer(b);
      return x === undefined || y === undefined ? undefined : compare(x, y);
    }
  }
  return undefined;
}

const INTEGER_OPS: Record<string, (x: number, y: number) => boolean> = {
  "-eq": (x, y) => x === y,
  "-ne": (x, y) => x !== y,
  "-lt": (x, y) => x < y,
  "-le": (x, y) => x <= y,
  "-gt": (x, y) => x > y,
  "-ge": (x, y) => x >= y,
};

function integer(text: string | undefined): number | undefined {
  return text !== undefined && /^\s*-?\d+\s*$/.test(text) ? Number(text) : undefined;
}

function fileKind(ctx: Parameters<ShellCommand>[0], path: string): { kind: string; size: number } | undefined {
  try {
    const path_ = pathOf(ctx, path);
    const node = ctx.device.fs.lookup(path_, ctx.caller);
    return { kind: node.kind, size: ctx.device.fs.stat(path_, ctx.caller).size };
  } catch {
    return undefined;
  }
}
