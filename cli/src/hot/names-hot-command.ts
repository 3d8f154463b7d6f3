import { takeOutputFormat } from "../options/output-format.js";
import { HOT_COMMANDS } from "../tree/hot-commands.js";

/**
 * Whether these arguments (-o/--output aside) start with a hot command's
 * name: only then does the installed entry load the hot bundle (the rest of
 * the parse is the bundle's own isHotCommand). Every other command goes
 * straight to lib/main.js without paying for the hot bundle.
 */
export function namesHotCommand(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  try {
    return HOT_COMMANDS.includes(takeOutputFormat(argv, env, false).rest[0] ?? "");
  } catch {
    // A config file that cannot be read: the CLI (lib/main.js) reports it.
    return false;
  }
}
