import type { DeviceState } from "../device/device-state.js";
import type { Caller } from "../fs/caller.js";
import { FsError } from "../fs/fs-error.js";
import type { FileSystem } from "../fs/file-system.js";
import type { Redirect } from "./ast.js";
import { NULL_SINK, inputFrom, type InputSource, type OutputSink } from "./io.js";

/** The file descriptors a command runs with. */
export interface ShellIO {
  stdin: InputSource;
  stdout: OutputSink;
  stderr: OutputSink;
}

/** A redirection that cannot be carried out; the command does not run. */
export class RedirectError extends Error {
  override name = "RedirectError";
}

/**
 * Applies redirections left to right, as sh does, so `>/dev/null 2>&1`
 * silences both streams while `2>&1 >/dev/null` keeps stderr on stdout.
 */
export function applyRedirects(
  redirects: readonly Redirect[],
  io: ShellIO,
  expand: (redirect: Redirect) => string,
  device: DeviceState,
  caller: Caller = device.shellCaller,
): ShellIO {
  let { stdin, stdout, stderr } = io;
  const sinkFor = (fd: number): OutputSink => {
    if (fd === 1) return stdout;
    if (fd === 2) return stderr;
    throw new RedirectError(`${fd}: bad file descriptor`);
  };
  const setSink = (fd: number, sink: OutputSink) => {
    if (fd === 1) stdout = sink;
    else if (fd === 2) stderr = sink;
    else throw new RedirectError(`${fd}: bad file descriptor`);
  };

  for (const redirect of redirects) {
    const target = expand(redirect);
    switch (redirect.op) {
      case ">":
      case ">>":
        setSink(redirect.fd, fileSink(device.fs, target, caller, redirect.op === ">>"));
        break;
      case "<": {
        let content: Buffer;
        try {
          content = device.fs.readFile(target, caller);
        } catch (error) {
          if (error instanceof FsError) throw new RedirectError(`can't open ${target}: ${error.message}`);
          throw error;
        }
        if (redirect.fd !== 0) throw new RedirectError(`${redirect.fd}: bad file descriptor`);
        stdin = inputFrom(content);
        break;
      }
      case ">&":
        if (target === "-") setSink(redirect.fd, NULL_SINK);
        else if (/^[0-9]$/.test(target)) setSink(redirect.fd, sinkFor(Number(target)));
        else throw new RedirectError(`${target}: illegal file descriptor name`);
        break;
      case "<&":
        if (redirect.fd !== 0 || (target !== "0" && target !== "-")) throw new RedirectError(`${target}: bad file descriptor`);
        break;
    }
  }
  return { stdin, stdout, stderr };
}

/** `> FILE` / `>> FILE`: opened (created/truncated) now, like sh; writes append as they come. */
function fileSink(fs: FileSystem, path: string, caller: Caller, append: boolean): OutputSink {
  try {
    if (fs.lookup(path, caller).kind === "char") return NULL_SINK;
  } catch {
    // Does not exist yet: created below.
  }
  try {
    const file = fs.openForWrite(path, caller, { append });
    return {
      write(data) {
        // ENOSPC surfaces in the writing command, as a failed write(2) would.
        fs.append(file, Buffer.from(typeof data === "string" ? Buffer.from(data) : data), path);
        return Promise.resolve();
      },
    };
  } catch (error) {
    if (error instanceof FsError) throw new RedirectError(`can't create ${path}: ${error.message}`);
    throw error;
  }
}
