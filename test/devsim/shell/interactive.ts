import type { InputSource, OutputSink } from "./io.js";
import { parseScript } from "./parser.js";
import type { Shell } from "./shell.js";
import { ShellSyntaxError } from "./tokenizer.js";

/**
 * sh reading its script from stdin: each complete command runs as soon as its
 * line arrives (a command spanning lines, like an open `while`, waits for the
 * rest). With a prompt, it behaves like an interactive terminal session.
 * Resolves to the shell's final status.
 */
export async function runInteractive(shell: Shell, stdin: InputSource, stdout: OutputSink, prompt?: string): Promise<number> {
  if (prompt !== undefined) await stdout.write(prompt);
  let pending = "";
  let buffered = "";
  for (let chunk = await stdin.read(); chunk; chunk = await stdin.read()) {
    buffered += chunk.toString("utf8");
    for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
      pending += buffered.slice(0, newline + 1);
      buffered = buffered.slice(newline + 1);
      if (isIncomplete(pending)) {
        if (prompt !== undefined) await stdout.write("> ");
        continue;
      }
      await shell.run(pending);
      pending = "";
      if (shell.exited) return shell.lastStatus;
      if (prompt !== undefined) await stdout.write(prompt);
    }
  }
  const rest = pending + buffered;
  if (rest.trim() !== "") await shell.run(rest);
  return shell.lastStatus;
}

function isIncomplete(script: string): boolean {
  try {
    parseScript(script);
    return false;
  } catch (error) {
    return error instanceof ShellSyntaxError && error.incomplete;
  }
}
