/**
 * The hot path's commands (hot-path.ts): the ones people and scripts run
 * most often, in a loop. A module without imports, so the installed
 * command's entry (entry.ts) can tell them apart before loading anything.
 */
export const HOT_COMMANDS: readonly string[] = ["shell", "devices", "screenshot", "input"];
