import { fileURLToPath } from "node:url";
import { exitCodeFor, type ErrorReport } from "@farm/shared/error-codes";
import { CliError } from "./cli-error.js";
import { formatError, takeOutputFormat } from "./options/output-format.js";
import { connectionScope } from "@farm/client/connections";
import { createPrinter, exitCodeOf, type OutputSinks } from "./output.js";
import type { Runtime } from "./tree/build.js";
import { isVersionQuery } from "./version/fast-version.js";
import { watchStdout } from "./stdout-watch.js";
import { presetRecordedCall, type Handover } from "./hot/recorded-call.js";

/**
 * The farm CLI. Start-up loads only the command tree's declarations
 * (tree/*-commands.ts) and commander; a command's implementation, and with
 * it Connect, SQLite, adb or sharp, is imported when that command runs.
 * The hot commands (`farm shell`, `farm devices`, …; tree/hot-path.ts) in
 * their plain spellings skip commander and the rest of the tree too.
 *
 * `sinks` run it in process (tests): what it prints goes there instead of
 * stdout and stderr (neither then counts as a terminal), SIGINT and SIGTERM
 * are left to the host, and the connections it opened are closed when it
 * returns (as a process's exit would).
 */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env, sinks?: OutputSinks, options: MainOptions = {}): Promise<number> {
  const stop = new AbortController();
  let received: NodeJS.Signals | undefined;
  const onSignal = (signal?: NodeJS.Signals) => {
    received ??= signal;
    stop.abort();
  };
  // A reader that closes stdout (`| head`) stops the command as SIGPIPE would, quietly.
  const stdout = sinks ? undefined : watchStdout(process.stdout, () => onSignal());
  presetRecordedCall(options.handover?.call);
  const running = run(argv, env, stop, onSignal, sinks, stdout ? (s) => stdout.write(s) : undefined, () => received, options);
  // lib/one.cjs's signal handlers give way to run's (installed before its first await); a signal it got counts here.
  const signal = options.handover?.takeSignal();
  if (signal) onSignal(signal);
  const code = await running;
  return stdout?.exitCode ?? code;
}

export interface MainOptions {
  /** false: parse every command with commander, the hot ones too (tests compare both paths). */
  hotPath?: boolean;
  /** What lib/one.cjs (hot/plain-run.ts) did before it handed this run over: the call it made, a signal it got. */
  handover?: Handover | undefined;
}

/** The hot path's commands never print the tree (only completion does); the tree is not loaded to describe it. */
function treeNotLoaded(): never {
  throw new Error("the command tree is not loaded on the hot path (cli/src/tree/hot-path.ts)");
}

/** A command a signal cut short exits as shells report it: 130 for SIGINT, 143 for SIGTERM. */
function signalledCode(signal: NodeJS.Signals | undefined): number | undefined {
  return signal === "SIGINT" ? 130 : signal === "SIGTERM" ? 143 : undefined;
}

async function run(
  argv: string[],
  env: NodeJS.ProcessEnv,
  stop: AbortController,
  onSignal: (signal?: NodeJS.Signals) => void,
  sinks: OutputSinks | undefined,
  toStdout: ((s: string) => void) | undefined,
  signalled: () => NodeJS.Signals | undefined,
  options: MainOptions,
): Promise<number> {
  const writeOut = sinks ? sinks.out : (toStdout ?? ((s: string) => void process.stdout.write(s)));
  const writeErr = sinks ? sinks.err : (s: string) => void process.stderr.write(s);
  const output = sinks ? takeOutputFormat(argv, env, false) : takeOutputFormat(argv, env);
  const printer = createPrinter(output.format, writeOut, writeErr);
  const connections = connectionScope();
  // In process the host owns its signals (and many runs at once would pile up listeners).
  if (!sinks) {
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  }
  const version = async () => {
    const { printVersion } = await import("./version/version-command.js");
    return printVersion(printer, env);
  };
  try {
    const refused = formatError(output);
    if (refused) throw refused;
    // Scripts call `farm --version` to probe for farm: answered without
    // loading commander or the command tree.
    if (isVersionQuery(output.rest)) return await version();
    const base: Omit<Runtime, "commandTree"> = {
      env,
      printer,
      format: output.format,
      formatChosen: output.chosen === true,
      formatSource: output.source,
      stopSignal: stop.signal,
      writeOut,
      writeErr,
      connections,
      // In process, argv[1] is the host's script: the entry is main.js beside this file (lib/main.js, when bundled).
      entry: sinks ? fileURLToPath(new URL("./main.js", import.meta.url)) : process.argv[1],
      ...(sinks ? { stderrIsTty: false } : {}),
    };
    // `farm shell -- …`, `farm devices`, …: parsed without commander or the tree (tree/hot-path.ts).
    const hot = options.hotPath === false ? undefined : (await import("./tree/hot-path.js")).parseHot(output.rest);
    if (hot) {
      const { runLeaf } = await import("./tree/run-leaf.js");
      const rt: Runtime = { ...base, commandTree: treeNotLoaded };
      await runLeaf(hot.spec, rt, hot.path, hot.flags, hot.args);
      return exitCodeOf(rt.exitCode ?? 0, printer);
    }
    const [{ buildProgram }, { describeTree }] = await Promise.all([import("./tree/program.js"), import("./tree/describe.js")]);
    const rt: Runtime = { ...base, commandTree: describeTree };
    await buildProgram(rt, version, output.rest).parseAsync(output.rest, { from: "user" });
    return exitCodeOf(rt.exitCode ?? 0, printer);
  } catch (err) {
    const { HelpShown } = await import("./tree/commander-errors.js");
    if (err instanceof HelpShown) return err.exitCode;
    const report = await reportOf(err);
    printer.failure(report);
    // A command that failed returns no code of its own: the error's, or the signal's that stopped it.
    return signalledCode(signalled()) ?? exitCodeFor(report.code);
  } finally {
    presetRecordedCall(undefined);
    connections.closeAll();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/** A CliError reports itself; anything else (an RPC's error) needs @farm/shared/errors, loaded only then. */
async function reportOf(err: unknown): Promise<ErrorReport> {
  if (err instanceof CliError) return err.report();
  const { cliErrorReport } = await import("./cli-error-report.js");
  return cliErrorReport(err);
}

/** Runs the CLI as this process: its arguments, environment, stdout and stderr, and its exit code. */
export async function runAsProcess(handover?: Handover): Promise<void> {
  const code = await main(process.argv.slice(2), process.env, undefined, { handover });
  // A closed stdout has nothing left to flush.
  if (process.stdout.destroyed) process.exit(code);
  // Flush stdout before exiting so piped JSON is never cut short.
  process.stdout.write("", () => process.exit(code));
}
