/**
 * An error devsim throws on ordinary paths (a missing file under `[ -e ]`,
 * every `exit`): no stack trace, which costs more than the work it reports.
 */
export class QuietError extends Error {
  constructor(message: string) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}
