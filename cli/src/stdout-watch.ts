/**
 * The process's stdout as a reader may close it (`farm --help | head`).
 * Node ignores SIGPIPE, so a write to a closed pipe fails with EPIPE and,
 * unhandled, dies with a stack trace. Instead: once stdout fails, nothing
 * more is written to it, `onClosed` runs (main stops the command as a
 * signal would, so a lease it holds is still released), and the process
 * exits as a Unix tool killed by SIGPIPE does (141), or with EX_IOERR (74)
 * when stdout failed some other way.
 */
export interface StdoutWatch {
  /** True once stdout is gone: writes are dropped. */
  readonly closed: boolean;
  /** The exit code a closed stdout calls for, or undefined while it is open. */
  readonly exitCode: number | undefined;
  write(text: string): void;
}

/** 128 + SIGPIPE (13): what a shell reports for a writer whose reader went away. */
export const EXIT_CLOSED_PIPE = 141;
/** sysexits EX_IOERR: stdout failed other than by its reader going away. */
export const EXIT_IO_ERROR = 74;

export function watchStdout(stream: NodeJS.WriteStream, onClosed: () => void): StdoutWatch {
  let failure: NodeJS.ErrnoException | undefined;
  const fail = (err: NodeJS.ErrnoException) => {
    if (failure) return;
    failure = err;
    onClosed();
  };
  // Kept for the life of the process: writes elsewhere (a binary to stdout) fail the same way.
  stream.on("error", fail);
  const exitCode = () => (failure === undefined ? undefined : failure.code === "EPIPE" ? EXIT_CLOSED_PIPE : EXIT_IO_ERROR);
  return {
    get closed() {
      return failure !== undefined;
    },
    get exitCode() {
      return exitCode();
    },
    write(text) {
      if (failure || stream.destroyed) return;
      stream.write(text);
      // A write that fails at once says so here; its error event comes a tick later.
      const err = stream.errored as NodeJS.ErrnoException | null;
      if (err) fail(err);
    },
  };
}
