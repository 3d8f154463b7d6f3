import { exitCodeFor, type ErrorReport } from "@farm/shared/error-codes";

/** json: one JSON object per result; pretty: text for people; wide: pretty with more columns where a list has them. */
export type OutputFormat = "json" | "pretty" | "wide";

export const outputFormats: readonly OutputFormat[] = ["json", "pretty", "wide"];

/** json when stdout is not a terminal (pipes, CI), pretty on a terminal. */
export function defaultFormat(isTty = process.stdout.isTTY === true): OutputFormat {
  return isTty ? "pretty" : "json";
}

export interface Printer {
  format: OutputFormat;
  /** True for `-o wide`: lists add the columns they have beyond the usual ones. */
  wide: boolean;
  /** Prints a success: the data as JSON, or the pretty rendering. */
  result(data: Record<string, unknown>, pretty: () => string): void;
  /** Prints a failure: the JSON envelope on stdout, or one line on stderr for people. */
  failure(report: ErrorReport): void;
  /** Prints data as given (it carries its own ok), or the pretty rendering. */
  emit(data: Record<string, unknown>, pretty: () => string): void;
  /** True once anything printed said ok:false (a failure, or data carrying ok false). */
  readonly failed: boolean;
  /** The error code of the first ok:false printed that carried one. */
  readonly failedCode: string | undefined;
}

/**
 * The process's exit code: what the command returned, unless it returned 0
 * after printing an ok:false: then the exit code of that failure's error
 * code (error-codes.ts), or 1 when it carried none.
 */
export function exitCodeOf(code: number, printer: Pick<Printer, "failed" | "failedCode">): number {
  if (code !== 0 || !printer.failed) return code;
  return printer.failedCode === undefined ? 1 : exitCodeFor(printer.failedCode);
}

/** The one-line form of an error for people: `error: <message> [CODE, field x]`. */
export function errorLine(report: Pick<ErrorReport, "code" | "message" | "field">): string {
  return `error: ${report.message} [${report.code}${report.field ? `, field ${report.field}` : ""}]`;
}

/** Where a run's output goes: the process's stdout and stderr, or strings a caller collects (main run in process). */
export interface OutputSinks {
  out(text: string): void;
  err(text: string): void;
}

export function createPrinter(
  format: OutputFormat,
  out: (s: string) => void = (s) => process.stdout.write(s),
  err: (s: string) => void = (s) => process.stderr.write(s),
): Printer {
  let failed = false;
  let failedCode: string | undefined;
  const noteFailure = (code: unknown) => {
    failed = true;
    if (failedCode === undefined && typeof code === "string") failedCode = code;
  };
  return {
    format,
    wide: format === "wide",
    get failed() {
      return failed;
    },
    get failedCode() {
      return failedCode;
    },
    result(data, pretty) {
      if (data["ok"] === false) noteFailure(data["code"]);
      if (format === "json") out(JSON.stringify({ ok: true, ...data }) + "\n");
      else out(pretty() + "\n");
    },
    emit(data, pretty) {
      if (data["ok"] === false) noteFailure(data["code"]);
      if (format === "json") out(JSON.stringify(data) + "\n");
      else out(pretty() + "\n");
    },
    failure(report) {
      noteFailure(report.code);
      if (format === "json") out(JSON.stringify(report) + "\n");
      else err(errorLine(report) + "\n");
    },
  };
}

/** Renders rows as an aligned plain-text table. */
export function table(headers: string[], rows: string[][]): string {
  if (rows.length === 0) return "(none)";
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/** "12s ago" style age for timestamps in pretty output. */
export function ago(ms: number | undefined, now = Date.now()): string {
  if (ms === undefined) return "never";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}
