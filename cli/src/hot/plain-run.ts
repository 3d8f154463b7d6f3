import { connectionScope } from "@farm/client/connections";
import { formatError, takeOutputFormat } from "../options/output-format.js";
import { createPrinter, exitCodeOf } from "../output.js";
import { watchStdout, type StdoutWatch } from "../stdout-watch.js";
import type { Runtime } from "../tree/build.js";
import { parseHot } from "../tree/hot-path.js";
import { runLeaf } from "../tree/run-leaf.js";
import type { ActionInput, AnyLeaf } from "../tree/spec.js";
import { attemptDevices } from "./devices-attempt.js";
import type { Handover, RecordedCall } from "./recorded-call.js";
import { attemptShell } from "./shell-attempt.js";

/**
 * The plain runner: lib/one.cjs (scripts/bundle-cli.mjs), a bundle of only
 * what a plain `farm shell -- …` or `farm devices` needs when it succeeds:
 * the same parse (tree/hot-path.ts), option resolution (tree/run-leaf.ts),
 * one request (shell-attempt.ts, devices-attempt.ts) and printing as the
 * CLI's, and nothing of the full path, the replay or commander, which a
 * plain answer never runs (they were most of lib/hot.cjs and its code
 * cache; docs/performance.md, "The CLI as users run it").
 *
 * Anything else is handed over before it prints: runPlain resolves to a
 * Handover and the installed command's entry (entry.ts) runs the full CLI
 * (lib/hot.cjs, or lib/main.js when nothing was tried), which starts again
 * from the arguments and judges the recorded call, if one was made, instead
 * of making it again. What the command prints and its exit code are the
 * full CLI's in every case (test/deploy/install-cli.test.ts compares them).
 */

/** Thrown inside the action to end the plain run; never leaves this module. */
class HandOver {
  constructor(readonly call: RecordedCall | undefined) {}
}

/**
 * Runs the command if its answer is plain; resolves once it printed and the
 * process is exiting (undefined), or to the Handover for the full CLI.
 */
export async function runPlain(argv: string[], env: NodeJS.ProcessEnv): Promise<Handover | undefined> {
  let received: NodeJS.Signals | undefined;
  const stop = new AbortController();
  const onSignal = (signal?: NodeJS.Signals) => {
    received ??= signal;
    stop.abort();
  };
  const handover = (call?: RecordedCall): Handover => ({
    call,
    takeSignal() {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      return received;
    },
  });
  let output: ReturnType<typeof takeOutputFormat>;
  try {
    output = takeOutputFormat(argv, env);
  } catch {
    return handover();
  }
  const hot = formatError(output) === undefined ? parseHot(output.rest) : undefined;
  const attempt = hot && plainAttempts[hot.spec.name];
  if (!hot || !attempt) return handover();
  // As main's: a signal during the call cancels it (the full CLI then reports it, exit 130/143).
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  // Created at the first write, which comes only after a plain answer (nothing is handed over after it).
  let stdout: StdoutWatch | undefined;
  const writeOut = (s: string) => (stdout ??= watchStdout(process.stdout, () => onSignal())).write(s);
  const writeErr = (s: string) => void process.stderr.write(s);
  const printer = createPrinter(output.format, writeOut, writeErr);
  const rt: Runtime = {
    env,
    printer,
    format: output.format,
    formatChosen: output.chosen === true,
    formatSource: output.source,
    stopSignal: stop.signal,
    writeOut,
    writeErr,
    connections: connectionScope(),
    entry: process.argv[1],
    commandTree: () => {
      throw new Error("the command tree is not loaded on the plain path (cli/src/hot/plain-run.ts)");
    },
  };
  try {
    const action = async (input: ActionInput<AnyLeaf["options"]>) => {
      const result = await attempt(input);
      if (result.kind === "done") return result.code;
      throw new HandOver(result.kind === "called" ? { command: hot.spec.name as RecordedCall["command"], outcome: result.outcome, requestId: result.requestId, started: result.started } : undefined);
    };
    await runLeaf({ ...hot.spec, load: async () => action } as AnyLeaf, rt, hot.path, hot.flags, hot.args);
  } catch (err) {
    // Any refusal (a bad option value, an unreadable config file) is the full CLI's to report; a call made is judged there.
    return handover(err instanceof HandOver ? err.call : undefined);
  }
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
  const code = stdout?.exitCode ?? exitCodeOf(rt.exitCode ?? 0, printer);
  // As cli-main.ts's runAsProcess: flush stdout before exiting so piped JSON is never cut short.
  if (process.stdout.destroyed) process.exit(code);
  process.stdout.write("", () => process.exit(code));
  return undefined;
}

type Attempt = (input: ActionInput<AnyLeaf["options"]>) => Promise<{ kind: "done"; code: number } | { kind: "unplanned" } | { kind: "called"; outcome: RecordedCall["outcome"]; requestId: string; started: number }>;

/** The hot commands with a plain run of their own; the others (screenshot, input) are handed over at once. */
const plainAttempts: Record<string, Attempt | undefined> = {
  shell: async (input) => {
    const a = await attemptShell(input as Parameters<typeof attemptShell>[0]);
    return a.kind === "called" ? { kind: "called", outcome: a.outcome, requestId: a.plan.requestId, started: a.started } : a;
  },
  devices: (input) => attemptDevices(input as Parameters<typeof attemptDevices>[0]),
};
