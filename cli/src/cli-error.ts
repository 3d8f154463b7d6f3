import { toErrorReport, type ErrorReport, type FarmErrorSpec } from "@farm/shared/errors";

/** An error raised on the client side before any RPC, e.g. bad flags; its field is a flag name. */
export class CliError extends Error {
  readonly code: FarmErrorSpec["code"];

  constructor(
    readonly spec: FarmErrorSpec,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = "CliError";
    this.code = spec.code;
  }
}

/**
 * The flag a request field is set by, where the two names differ. Servers
 * name fields by their proto path; the CLI prints what the user typed.
 */
const flagForField: Readonly<Record<string, string>> = {
  "target.serial": "device",
  "target.agent": "agent",
  "target.request_id": "request-id",
  action_id: "action-id",
  session_id: "session",
  x_farm_lease: "lease",
  duration_seconds: "duration-seconds",
  context_json: "context-json",
  timeout_ms: "timeout",
  app_package: "app-package",
  "selector.api_level": "api-level",
};

/** The flag name for a proto field path (unchanged when no flag sets it). */
export function flagFor(field: string): string {
  return flagForField[field] ?? field;
}

/** Maps any thrown value to the report the CLI prints, fields named by flag. */
export function cliErrorReport(err: unknown): ErrorReport {
  if (err instanceof CliError) return err.field ? { ok: false, code: err.code, message: err.message, field: err.field } : { ok: false, code: err.code, message: err.message };
  const report = toErrorReport(err);
  return report.field ? { ...report, field: flagFor(report.field) } : report;
}
