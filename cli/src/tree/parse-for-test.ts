import { formatError, takeOutputFormat } from "../options/output-format.js";
import { connectionScope } from "@farm/client/connections";
import { createPrinter } from "../output.js";
import type { ParsedCommand, Runtime } from "./build.js";
import { HelpShown } from "./commander-errors.js";
import { buildProgram } from "./program.js";
import { describeTree } from "./describe.js";

/**
 * Parses a command line as `farm` would, without running anything: the
 * command it names, its resolved options and arguments, or the error it
 * raises. For tests of spellings, precedence and parse errors.
 */
export async function parseOnly(argv: string[], env: NodeJS.ProcessEnv = { FARM_CONFIG: "/nonexistent/farm/config.json" }): Promise<{ parsed?: ParsedCommand; error?: unknown; out: string; exitCode?: number }> {
  const output = takeOutputFormat(argv, env, false);
  let out = "";
  let parsed: ParsedCommand | undefined;
  const rt: Runtime = {
    env,
    printer: createPrinter(output.format, (s) => (out += s), (s) => (out += s)),
    format: output.format,
    stopSignal: new AbortController().signal,
    commandTree: describeTree,
    connections: connectionScope(),
    writeOut: (s) => (out += s),
    writeErr: (s) => (out += s),
    intercept: (p) => (parsed = p),
  };
  try {
    const refused = formatError(output);
    if (refused) throw refused;
    // As main does: only the part of the tree the arguments name.
    await buildProgram(rt, async () => 0, output.rest).parseAsync(output.rest, { from: "user" });
    return { ...(parsed ? { parsed } : {}), out, ...(rt.exitCode !== undefined ? { exitCode: rt.exitCode } : {}) };
  } catch (error) {
    if (error instanceof HelpShown) return { out, exitCode: error.exitCode };
    return { error, out };
  }
}
