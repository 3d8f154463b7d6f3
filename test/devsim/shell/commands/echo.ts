import type { ShellCommand } from "../command.js";

const ESCAPES: Record<string, string> = { "\\": "\\", a: "\x07", b: "\b", e: "\x1b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v" };

/** Interprets `echo -e` escapes; returns the text and whether \c cut the output. */
function unescape(text: string): { text: string; stop: boolean } {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== "\\" || i + 1 >= text.length) {
      out += c;
      continue;
    }
    const next = text[++i]!;
    if (next === "c") return { text: out, stop: true };
    if (next in ESCAPES) {
      out += ESCAPES[next];
    } else if (next === "0") {
      const digits = /^[0-7]{0,3}/.exec(text.slice(i + 1))![0];
      out += String.fromCharCode(parseInt(digits || "0", 8));
      i += digits.length;
    } else if (next === "x") {
      const digits = /^[0-9a-fA-F]{0,2}/.exec(text.slice(i + 1))![0];
      if (digits) {
        out += String.fromCharCode(parseInt(digits, 16));
        i += digits.length;
      } else {
        out += "\\x";
      }
    } else {
      out += `\\${next}`;
    }
  }
  return { text: out, stop: false };
}

/** toybox echo: options -n, -e, -E (combinable, e.g. -ne), stop at the first non-option. */
export const echoCommand: ShellCommand = async (ctx) => {
  let newline = true;
  let escapes = false;
  let index = 0;
  for (; index < ctx.args.length; index++) {
    const arg = ctx.args[index]!;
    if (!/^-[neE]+$/.test(arg)) break;
    for (const flag of arg.slice(1)) {
      if (flag === "n") newline = false;
      else escapes = flag === "e";
    }
  }
  let text = ctx.args.slice(index).join(" ");
  if (escapes) {
    const result = unescape(text);
    text = result.text;
    if (result.stop) newline = false;
  }
  await ctx.stdout.write(newline ? `${text}\n` : text);
  return 0;
};
