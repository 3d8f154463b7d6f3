import type { ShellCommand } from "../command.js";
import { splitOptions } from "./file-args.js";

/** toybox grep subset on stdin or files: -E -F -i -v -c -q -o; status 1 when nothing matched. */
export const grepCommand: ShellCommand = async (ctx) => {
  const args = [...ctx.args];
  const patterns: string[] = [];
  for (let e = args.indexOf("-e"); e >= 0; e = args.indexOf("-e")) {
    patterns.push(args[e + 1] ?? "");
    args.splice(e, 2);
  }
  const { flags, operands, bad } = splitOptions(args, "EFivcqow");
  if (bad !== undefined) {
    await ctx.stderr.write(`grep: Unknown option '${bad}'\n`);
    return 2;
  }
  if (patterns.length === 0) {
    const first = operands.shift();
    if (first === undefined) {
      await ctx.stderr.write("grep: Needs 1 argument\n");
      return 2;
    }
    patterns.push(first);
  }
  const source = (p: string) => (flags.has("F") ? p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : flags.has("E") ? p : basicToExtended(p));
  const regex = new RegExp(patterns.map(source).map((p) => (flags.has("w") ? `\\b(?:${p})\\b` : p)).join("|"), flags.has("i") ? "gi" : "g");
  let text = "";
  if (operands.length === 0) {
    for (let chunk = await ctx.stdin.read(); chunk; chunk = await ctx.stdin.read()) text += chunk.toString("utf8");
  } else {
    for (const operand of operands) {
      const content = ctx.device.readFile(operand.startsWith("/") ? operand : `${ctx.cwd}/${operand}`);
      if (content === undefined) {
        await ctx.stderr.write(`grep: ${operand}: No such file or directory\n`);
        continue;
      }
      text += content.toString("utf8");
    }
  }
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  let count = 0;
  const out: string[] = [];
  for (const line of lines) {
    regex.lastIndex = 0;
    const matched = regex.test(line);
    if (matched === flags.has("v")) continue;
    count++;
    if (flags.has("o") && !flags.has("v")) out.push(...[...line.matchAll(regex)].map((m) => m[0]));
    else out.push(line);
  }
  if (!flags.has("q")) {
    if (flags.has("c")) await ctx.stdout.write(`${count}\n`);
    else if (out.length > 0) await ctx.stdout.write(`${out.join("\n")}\n`);
  }
  return count > 0 ? 0 : 1;
};

/** Basic regex syntax: \| \( \) \{ are operators, bare | ( ) { are literals. */
function basicToExtended(pattern: string): string {
  return pattern.replace(/\\([|(){}+?])|([|(){}+?])/g, (_, escaped: string | undefined, bare: string | undefined) => (escaped ? escaped : `\\${bare}`));
}
