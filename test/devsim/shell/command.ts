import type { DeviceState } from "../device/device-state.js";
import { QuietError } from "../quiet-error.js";
import type { Caller } from "../fs/caller.js";
import type { InputSource, OutputSink } from "./io.js";

/** Overrides for a command run on behalf of another (run-as: other uid and cwd). */
export interface RunOverrides {
  caller?: Caller;
  cwd?: string;
  stdin?: InputSource;
  stdout?: OutputSink;
  stderr?: OutputSink;
}

/** What a command implementation gets to work with. */
export interface CommandContext {
  /** argv[0] as typed (may be a path such as /system/bin/getprop). */
  name: string;
  /** Arguments after argv[0]. */
  args: string[];
  stdin: InputSource;
  stdout: OutputSink;
  stderr: OutputSink;
  device: DeviceState;
  /** Exit status of the previous command ($?). */
  lastStatus: number;
  /** Aborted when the session ends (host closed the stream, device vanished). */
  signal: AbortSignal;
  /** The uid/groups the command runs as (file permission checks). */
  caller: Caller;
  /** Working directory; relative paths resolve against it. */
  cwd: string;
  /** Set when the session has a terminal (pty). */
  terminal?: { rows: number; cols: number };
  /** Runs another command (argv, no shell parsing) with the same IO unless overridden. */
  runCommand(argv: readonly string[], overrides?: RunOverrides): Promise<number>;
  /** Runs shell text in a child sh (sh -c), with the same IO unless overridden. */
  runScript(script: string, overrides?: RunOverrides): Promise<number>;
}

/** A shell command; resolves to its exit status (0–255). */
export type ShellCommand = (ctx: CommandContext) => Promise<number> | number;

export type CommandTable = ReadonlyMap<string, ShellCommand>;

/** Thrown by `exit` to unwind the whole script with a status. */
export class ExitRequest extends QuietError {
  override name = "ExitRequest";
  constructor(readonly status: number) {
    super(`exit ${status}`);
  }
}
