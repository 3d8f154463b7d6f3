import { FsError } from "../../fs/fs-error.js";
import { resolvePath } from "../../fs/file-system.js";
import type { CommandContext } from "../command.js";

/** Splits toybox-style short options (`-rf`, `-p`) from operands; `--` ends options. */
export function splitOptions(args: readonly string[], known: string): { flags: Set<string>; operands: string[]; bad?: string } {
  const flags = new Set<string>();
  const operands: string[] = [];
  let optionsDone = false;
  for (const arg of args) {
    if (!optionsDone && arg === "--") {
      optionsDone = true;
    } else if (!optionsDone && arg.startsWith("-") && arg.length > 1) {
      for (const flag of arg.slice(1)) {
        if (!known.includes(flag)) return { flags, operands, bad: flag };
        flags.add(flag);
      }
    } else {
      operands.push(arg);
    }
  }
  return { flags, operands };
}

/** Absolute path of an operand for this command. */
export function pathOf(ctx: CommandContext, operand: string): string {
  return resolvePath(ctx.cwd, operand);
}

/** Prints `NAME: OPERAND: strerror` for a filesystem failure; rethrows anything else. */
export async function reportFsError(ctx: CommandContext, operand: string, error: unknown): Promise<void> {
  if (!(error instanceof FsError)) throw error;
  await ctx.stderr.write(`${ctx.name.slice(ctx.name.lastIndexOf("/") + 1)}: ${operand}: ${error.message}\n`);
}
