import { formatError, takeOutputFormat } from "../options/output-format.js";
import { createPrinter } from "../output.js";
import { configuredCoordinator } from "./configured-coordinator.js";
import { printLocalVersion } from "./version-command.js";

const versionSpellings = new Set(["--version", "-v", "version"]);

/** `farm --version` (or -v, or the old `farm version`) and nothing else but the output format. */
export function isVersionQuery(rest: readonly string[]): boolean {
  return rest.length === 1 && versionSpellings.has(rest[0] as string);
}

/**
 * Answers `farm --version` when it needs nothing but this file: a valid
 * output format and no coordinator to ask. Scripts probe for farm with it,
 * so the installed entry (entry.ts) asks here before loading the CLI.
 * Returns false, having printed nothing, for everything else (the CLI
 * itself then answers, refusals included).
 */
export function answerLocalVersion(argv: readonly string[], env: NodeJS.ProcessEnv, out: (s: string) => void): boolean {
  try {
    const output = takeOutputFormat(argv, env);
    if (formatError(output) || !isVersionQuery(output.rest) || configuredCoordinator(undefined, env)) return false;
    printLocalVersion(createPrinter(output.format, out));
    return true;
  } catch {
    return false;
  }
}
