import { formatError, takeOutputFormat } from "../options/output-format.js";
import { parseHot } from "../tree/hot-path.js";

/**
 * The hot bundle's entry (lib/hot.cjs; scripts/bundle-cli.mjs): the CLI
 * (cli-main.ts) with only what the hot commands (tree/hot-path.ts) load,
 * as one CommonJS file the installed command compiles with a V8 code cache
 * (hot-bundle.ts). Every other import() in it throws: the command's entry
 * asks isHotCommand first and gives anything else to lib/main.js.
 */
export { runAsProcess } from "../cli-main.js";

/** Whether cli-main.ts would run these arguments on the hot path (the same checks, in the same order). */
export function isHotCommand(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  let output: ReturnType<typeof takeOutputFormat>;
  try {
    output = takeOutputFormat(argv, env, false);
  } catch {
    // A config file that cannot be read: main.js reports it.
    return false;
  }
  return formatError(output) === undefined && parseHot(output.rest) !== undefined;
}
