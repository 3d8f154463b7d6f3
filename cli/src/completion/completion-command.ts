import type { completionOptions } from "../tree/misc-commands.js";
import type { Action } from "../tree/spec.js";
import { bashCompletion } from "./bash.js";
import { fishCompletion } from "./fish.js";
import { zshCompletion } from "./zsh.js";

const scripts = { bash: bashCompletion, zsh: zshCompletion, fish: fishCompletion };

/** `farm completion bash|zsh|fish`: the script on stdout, whatever the output format (it is meant to be sourced). */
export function completionAction(shell: keyof typeof scripts): Action<typeof completionOptions> {
  return async ({ ctx }) => {
    ctx.writeOut(scripts[shell](ctx.commandTree()));
    return 0;
  };
}
