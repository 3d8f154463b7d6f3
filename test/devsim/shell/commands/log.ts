import type { ShellCommand } from "../command.js";

const PRIORITIES = "vdiwef";

/** `log [-p v|d|i|w|e|f] [-t TAG] MESSAGE...`: writes one line to the main log, as Android's `log` tool does. */
export const logCommand: ShellCommand = async (ctx) => {
  let priority = 4;
  let tag = "log";
  const words: string[] = [];
  for (let index = 0; index < ctx.args.length; index++) {
    const arg = ctx.args[index]!;
    if (arg === "-p") {
      const letter = (ctx.args[++index] ?? "").toLowerCase();
      const at = PRIORITIES.indexOf(letter);
      if (letter.length !== 1 || at < 0) {
        await ctx.stderr.write(`log: invalid priority '${letter}'\n`);
        return 1;
      }
      priority = at + 2;
    } else if (arg === "-t") tag = ctx.args[++index] ?? tag;
    else words.push(arg);
  }
  // The tool's own process, as on a phone (each run is a new one; one pid is enough here).
  ctx.device.log.add({ pid: 2000, priority, tag, message: words.join(" ") });
  return 0;
};
