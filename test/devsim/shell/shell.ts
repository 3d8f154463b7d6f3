import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import type { DeviceState } from "../device/device-state.js";
import type { Caller } from "../fs/caller.js";
import { resolvePath } from "../fs/file-system.js";
import { FsError } from "../fs/fs-error.js";
import type { AndOrList, CommandList, CommandNode, Pipeline, SimpleCommand, Word } from "./ast.js";
import { ExitRequest, type CommandTable, type RunOverrides, type ShellCommand } from "./command.js";
import { DEFAULT_COMMANDS } from "./commands/index.js";
import { expandWord, expandWordToString, type CommandOutput } from "./expand.js";
import { BytePipe, CollectingSink, EMPTY_INPUT, type InputSource, type OutputSink } from "./io.js";
import { parseScript } from "./parser.js";
import { RedirectError, applyRedirects, type ShellIO } from "./redirects.js";
import { literalText, ShellSyntaxError } from "./tokenizer.js";

export interface ShellOptions {
  device: DeviceState;
  stdout: OutputSink;
  stderr: OutputSink;
  stdin?: InputSource;
  /** Ends the session (host closed the stream); running commands stop. */
  signal?: AbortSignal;
  commands?: CommandTable;
  /** Who the shell runs as (default: the device's adbd shell user). */
  caller?: Caller;
  /** Initial working directory (default /). */
  cwd?: string;
  /** The session's terminal (pty sessions only), updated by window-size packets. */
  terminal?: { rows: number; cols: number };
}

/** Exit status of a shell killed by SIGHUP, what adbd's child sees when the host hangs up. */
export const STATUS_HANGUP = 128 + 1;

const SHELL_NAME = "/system/bin/sh";
const BIN_DIRS = new Set(["/system/bin", "/system/xbin", "/bin", "/vendor/bin", "/product/bin", "/apex/com.android.runtime/bin"]);

/** Commands mksh runs itself; every other one costs a process on a phone (see the latency profiles). */
const MKSH_BUILTINS = new Set([":", "true", "false", "exit", "echo", "kill", "pwd", "test", "[", "read"]);

/** `trap '' HUP` (or 1, SIGHUP): the hangup is ignored from here on, as under nohup. */
function ignoresHangupTrap(argv: readonly (string | undefined)[]): boolean {
  return argv[0] === "trap" && argv[1] === "" && argv.slice(2).some((s) => s === "HUP" || s === "1" || s === "SIGHUP");
}

/**
 * One `sh` process: runs scripts against a device, keeping variables and $?
 * between `run` calls (so an interactive session can feed it line by line).
 */
export class Shell {
  /** Status of the last pipeline ($?). */
  lastStatus = 0;
  /** Set once `exit` ran or the session was aborted. */
  exited = false;
  private readonly vars = new Map<string, string>();
  private readonly io: ShellIO;
  private readonly signal: AbortSignal;
  private readonly commands: CommandTable;
  private readonly pid = 1000 + Math.floor(Math.random() * 30000);
  /** Background jobs (`&`) by pid, until `wait` collects them. */
  private readonly jobs = new Map<number, Promise<number>>();
  private lastJobPid: number | undefined;
  /** Set by `trap '' HUP`: jobs started from here on outlive the session, as under nohup. */
  private ignoresHangup = false;
  readonly caller: Caller;
  /** Working directory (cd changes it). */
  cwd: string;

  constructor(private readonly options: ShellOptions) {
    this.io = { stdin: options.stdin ?? EMPTY_INPUT, stdout: options.stdout, stderr: options.stderr };
    this.signal = options.signal ?? new AbortController().signal;
    this.commands = options.commands ?? DEFAULT_COMMANDS;
    this.caller = options.caller ?? options.device.shellCaller;
    this.cwd = options.cwd ?? "/";
    const device = options.device.props.get("ro.product.device") ?? "localhost";
    const defaults: Record<string, string> = {
      PATH: "/product/bin:/apex/com.android.runtime/bin:/apex/com.android.art/bin:/system_ext/bin:/system/bin:/system/xbin:/odm/bin:/vendor/bin:/vendor/xbin",
      HOME: "/",
      TMPDIR: "/data/local/tmp",
      ANDROID_DATA: "/data",
      ANDROID_ROOT: "/system",
      EXTERNAL_STORAGE: "/sdcard",
      USER: "shell",
      LOGNAME: "shell",
      HOSTNAME: device,
    };
    for (const [key, value] of Object.entries(defaults)) this.vars.set(key, value);
  }

  /** Parses and runs a script; resolves to its exit status. Never rejects for script errors. */
  async run(script: string): Promise<number> {
    let list: CommandList;
    try {
      list = parseScript(script);
    } catch (error) {
      if (!(error instanceof ShellSyntaxError)) throw error;
      await this.io.stderr.write(`${SHELL_NAME}: syntax error: ${error.message}\n`);
      return (this.lastStatus = 1);
    }
    try {
      return (this.lastStatus = await this.list(list, this.io));
    } catch (error) {
      if (error instanceof ExitRequest) {
        this.exited = true;
        return (this.lastStatus = error.status);
      }
      if (this.signal.aborted) {
        this.exited = true;
        return (this.lastStatus = STATUS_HANGUP);
      }
      throw error;
    }
  }

  private async list(list: CommandList, io: ShellIO): Promise<number> {
    let status = 0;
    for (const item of list.items) status = item.background ? this.startJob(item, io) : await this.andOr(item, io);
    return status;
  }

  /**
   * `LIST &`: runs in a subshell without waiting. Without job control its
   * stdin is empty, and the host hanging up ends it (SIGHUP) unless it was
   * started under `nohup`; a reboot ends it either way.
   */
  private startJob(item: AndOrList, io: ShellIO): number {
    const first = item.first.commands[0];
    const nohup = first?.type === "simple" && first.words[0] !== undefined && literalText(first.words[0]) === "nohup";
    // `trap '' HUP` in the subshell itself, as its first command, also makes it immune.
    const body = first?.type === "subshell" ? first.body.items[0]?.first.commands[0] : undefined;
    const trapped = body?.type === "simple" && ignoresHangupTrap(body.words.map(literalText));
    const device = this.options.device.bootSignal;
    const signal = nohup || trapped || this.ignoresHangup ? device : AbortSignal.any([this.signal, device]);
    const child = this.fork(io, signal);
    const pid = child.pid;
    const job = (async () => {
      await yieldToEventLoop();
      try {
        return await child.andOr({ ...item, background: false }, { stdin: EMPTY_INPUT, stdout: io.stdout, stderr: io.stderr });
      } catch (error) {
        if (error instanceof ExitRequest) return error.status;
        if (signal.aborted) return STATUS_HANGUP;
        return 1;
      }
    })();
    this.jobs.set(pid, job);
    this.lastJobPid = pid;
    return 0;
  }

  /** A copy of this shell (subshell or job): same variables, directory and caller. */
  private fork(io: ShellIO, signal: AbortSignal): Shell {
    const child = new Shell({ ...this.options, stdin: io.stdin, stdout: io.stdout, stderr: io.stderr, signal, caller: this.caller, cwd: this.cwd });
    for (const [key, value] of this.vars) child.vars.set(key, value);
    child.ignoresHangup = this.ignoresHangup;
    return child;
  }

  /** `wait [PID…]`: the status of the last job waited for (127 for an unknown pid). */
  private async waitJobs(args: string[]): Promise<number> {
    const pids = args.length > 0 ? args.map(Number) : [...this.jobs.keys()];
    let status = 0;
    for (const pid of pids) {
      const job = this.jobs.get(pid);
      if (!job) {
        status = 127;
        continue;
      }
      // Rejects when this shell's own session ends, as `wait` is interrupted by SIGHUP.
      status = await Promise.race([
        job,
        new Promise<never>((_, reject) => {
          if (this.signal.aborted) reject(this.signal.reason);
          this.signal.addEventListener("abort", () => reject(this.signal.reason), { once: true });
        }),
      ]);
      this.jobs.delete(pid);
    }
    return status;
  }

  private async andOr(list: AndOrList, io: ShellIO): Promise<number> {
    let status = await this.pipeline(list.first, io);
    for (const { op, pipeline } of list.rest) {
      if ((op === "&&") === (status === 0)) status = await this.pipeline(pipeline, io);
    }
    return status;
  }

  private async pipeline(pipeline: Pipeline, io: ShellIO): Promise<number> {
    this.signal.throwIfAborted();
    let status: number;
    if (pipeline.commands.length === 1) {
      status = await this.command(pipeline.commands[0]!, io);
    } else {
      status = await this.runPipe(pipeline.commands, io);
    }
    if (pipeline.negate) status = status === 0 ? 1 : 0;
    this.lastStatus = status;
    return status;
  }

  /** Runs `a | b | c` concurrently over bounded pipes; status is the last command's. */
  private async runPipe(commands: readonly CommandNode[], io: ShellIO): Promise<number> {
    const pipes = commands.slice(1).map(() => new BytePipe());
    const runs = commands.map(async (command, index) => {
      const stdin = index === 0 ? io.stdin : pipes[index - 1]!;
      const stdout = index === commands.length - 1 ? io.stdout : pipes[index]!;
      try {
        return await this.command(command, { stdin, stdout, stderr: io.stderr });
      } catch (error) {
        // Each pipeline element is a subshell: `exit` ends only that element.
        if (error instanceof ExitRequest) return error.status;
        throw error;
      } finally {
        if (index < pipes.length) pipes[index]!.close();
        if (index > 0) pipes[index - 1]!.closeRead();
      }
    });
    const results = await Promise.allSettled(runs);
    for (const result of results) if (result.status === "rejected") throw result.reason;
    const last = results[results.length - 1]!;
    return last.status === "fulfilled" ? last.value : 1;
  }

  private async command(command: CommandNode, io: ShellIO): Promise<number> {
    if (command.type === "simple") return this.simple(command, io);
    const redirected = await this.redirect(command.redirects, io);
    if (!redirected) return 1;
    if (command.type === "subshell") {
      const child = this.fork(redirected, this.signal);
      try {
        return await child.list(command.body, redirected);
      } catch (error) {
        if (error instanceof ExitRequest) return error.status;
        throw error;
      }
    }
    if (command.type === "loop") {
      let status = 0;
      for (;;) {
        const condition = await this.list(command.condition, redirected);
        if (command.until ? condition === 0 : condition !== 0) break;
        status = await this.list(command.body, redirected);
        // Let socket events (e.g. the host closing the stream) through between iterations.
        await yieldToEventLoop();
        this.signal.throwIfAborted();
      }
      return status;
    }
    for (const branch of command.branches) {
      if ((await this.list(branch.condition, redirected)) === 0) return this.list(branch.body, redirected);
    }
    return command.elseBody ? this.list(command.elseBody, redirected) : 0;
  }

  private async simple(command: SimpleCommand, io: ShellIO): Promise<number> {
    const lookup = (name: string) => this.param(name);
    const outputs = await this.substitute([...command.words, ...command.assignments.map((a) => a.value), ...command.redirects.map((r) => r.target)], io);
    const commandOutput = (script: string) => outputs.get(script) ?? "";
    const argv = command.words.flatMap((word) => expandWord(word, lookup, commandOutput));
    const redirected = await this.redirect(command.redirects, io, commandOutput);
    if (!redirected) return 1;
    const [name, ...args] = argv;
    if (name === undefined) {
      for (const { name: variable, value } of command.assignments) this.vars.set(variable, expandWordToString(value, lookup, commandOutput));
      return outputs.size > 0 ? this.lastStatus : 0;
    }
    return this.exec(name, args, redirected, {});
  }

  /** Runs one command by name with its IO (and, for run-as, another caller/cwd). */
  private async exec(name: string, args: string[], io: ShellIO, overrides: RunOverrides): Promise<number> {
    // cd, export and exec change this shell's own state, so they cannot be table commands.
    if (name === "cd") return this.changeDirectory(args[0] ?? "/", io);
    if (name === "wait") return this.waitJobs(args);
    if (name === "trap") {
      // Only what scripts here need: `trap '' HUP` ignores the hangup; other traps are accepted and do nothing.
      if (ignoresHangupTrap([name, ...args])) this.ignoresHangup = true;
      return 0;
    }
    if (name === "eval") {
      let list: CommandList;
      try {
        list = parseScript(args.join(" "));
      } catch (error) {
        // mksh reports it and goes on with a failed status; the session lives.
        if (!(error instanceof ShellSyntaxError)) throw error;
        await io.stderr.write(`${SHELL_NAME}: eval: syntax error: ${error.message}\n`);
        return 1;
      }
      return this.list(list, io);
    }
    if (name === "read") return this.readLine(args, io);
    if (name === "export") {
      for (const arg of args) {
        const eq = arg.indexOf("=");
        if (eq > 0) this.vars.set(arg.slice(0, eq), arg.slice(eq + 1));
      }
      return 0;
    }
    if (name === "exec") {
      if (args.length === 0) return 0;
      throw new ExitRequest(await this.exec(args[0]!, args.slice(1), io, overrides));
    }
    const implementation = this.resolve(name);
    if (!implementation) {
      await io.stderr.write(`${SHELL_NAME}: ${name}: not found\n`);
      return 127;
    }
    const caller = overrides.caller ?? this.caller;
    const cwd = overrides.cwd ?? this.cwd;
    // A command that is not built into mksh is a fork and exec on a phone.
    const latency = this.options.device.latency;
    if (!latency.instant && !MKSH_BUILTINS.has(name)) await latency.wait("spawnMs");
    try {
      const status = await implementation({
        name,
        args,
        ...io,
        device: this.options.device,
        lastStatus: this.lastStatus,
        signal: this.signal,
        caller,
        cwd,
        ...(this.options.terminal ? { terminal: this.options.terminal } : {}),
        runCommand: (argv, next = {}) => {
          const [command, ...rest] = argv;
          if (command === undefined) return Promise.resolve(0);
          const nextIo = { stdin: next.stdin ?? io.stdin, stdout: next.stdout ?? io.stdout, stderr: next.stderr ?? io.stderr };
          return this.exec(command, rest, nextIo, { caller: next.caller ?? caller, cwd: next.cwd ?? cwd });
        },
        runScript: (script, next = {}) => {
          const child = new Shell({
            ...this.options,
            stdin: next.stdin ?? io.stdin,
            stdout: next.stdout ?? io.stdout,
            stderr: next.stderr ?? io.stderr,
            signal: this.signal,
            caller: next.caller ?? caller,
            cwd: next.cwd ?? cwd,
          });
          return child.run(script);
        },
      });
      return status & 0xff;
    } catch (error) {
      if (error instanceof ExitRequest || this.signal.aborted) throw error;
      // A bug in a simulated command must not take the device down.
      await io.stderr.write(`${name}: ${error instanceof Error ? error.message : String(error)}\n`);
      return 1;
    }
  }

  /**
   * Runs the `$(…)` substitutions of some words in child shells (sharing
   * stderr, output captured, trailing newlines removed), before expansion.
   */
  private async substitute(words: readonly Word[], io: ShellIO): Promise<Map<string, string>> {
    const outputs = new Map<string, string>();
    for (const word of words) {
      for (const part of word.parts) {
        if (part.type !== "command" || outputs.has(part.script)) continue;
        const stdout = new CollectingSink();
        const child = new Shell({ ...this.options, stdin: io.stdin, stdout, stderr: io.stderr, signal: this.signal, caller: this.caller, cwd: this.cwd });
        this.lastStatus = await child.run(part.script);
        outputs.set(part.script, stdout.text().replace(/\n+$/, ""));
      }
    }
    return outputs;
  }

  /** Applies redirections, printing the shell's error and returning undefined when one fails. */
  private async redirect(redirects: SimpleCommand["redirects"], io: ShellIO, commandOutput?: CommandOutput): Promise<ShellIO | undefined> {
    if (redirects.length === 0) return io;
    try {
      return applyRedirects(redirects, io, (r) => resolveTarget(expandWordToString(r.target, (n) => this.param(n), commandOutput), r.op, this.cwd), this.options.device, this.caller);
    } catch (error) {
      if (!(error instanceof RedirectError)) throw error;
      await io.stderr.write(`${SHELL_NAME}: ${error.message}\n`);
      return undefined;
    }
  }

  /**
   * `read [-r] NAME`: one line of stdin into NAME; 1 at end of input. Reads
   * whole chunks, so what follows the line is lost: enough for `read X < FILE`.
   */
  private async readLine(args: string[], io: ShellIO): Promise<number> {
    const names = args.filter((a) => a !== "-r");
    const parts: Buffer[] = [];
    let found = false;
    for (let chunk = await io.stdin.read(); chunk; chunk = await io.stdin.read()) {
      const nl = chunk.indexOf(10);
      parts.push(nl < 0 ? chunk : chunk.subarray(0, nl));
      if (nl >= 0) {
        found = true;
        break;
      }
    }
    const line = Buffer.concat(parts);
    this.vars.set(names[0] ?? "REPLY", line.toString("utf8"));
    return found || line.length > 0 ? 0 : 1;
  }

  private async changeDirectory(target: string, io: ShellIO): Promise<number> {
    const path = resolvePath(this.cwd, target);
    try {
      const node = this.options.device.fs.lookup(path, this.caller);
      if (node.kind !== "dir") throw new FsError("ENOTDIR", path);
      this.cwd = path;
      return 0;
    } catch (error) {
      if (!(error instanceof FsError)) throw error;
      await io.stderr.write(`${SHELL_NAME}: cd: ${target}: ${error.message}\n`);
      return 2;
    }
  }

  private resolve(name: string): ShellCommand | undefined {
    const slash = name.lastIndexOf("/");
    if (slash < 0) return this.commands.get(name);
    return BIN_DIRS.has(name.slice(0, slash)) ? this.commands.get(name.slice(slash + 1)) : undefined;
  }

  private param(name: string): string | undefined {
    switch (name) {
      case "?":
        return String(this.lastStatus);
      case "$":
        return String(this.pid);
      case "!":
        return this.lastJobPid === undefined ? "" : String(this.lastJobPid);
      case "#":
        return "0";
      case "0":
        return SHELL_NAME;
      default:
        return this.vars.get(name);
    }
  }
}

/** File targets resolve against the cwd; fd numbers and `-` stay as typed. */
function resolveTarget(target: string, op: string, cwd: string): string {
  if (op === ">&" || op === "<&") return target;
  return resolvePath(cwd, target);
}
