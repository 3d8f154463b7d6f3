import { toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { CliError } from "./cli-error.js";

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
  "tap.element.resource_id": "id",
  "tap.element.text": "text",
  "tap.element.content_desc": "desc",
};

/** The flag name for a proto field path (unchanged when no flag sets it). */
export function flagFor(field: string): string {
  return flagForField[field] ?? field;
}

/** Maps any thrown value to the report the CLI prints, fields named by flag. */
export function cliErrorReport(err: unknown): ErrorReport {
  if (err instanceof CliError) return err.report();
  const report = toErrorReport(err);
  return report.field ? { ...report, field: flagFor(report.field) } : report;
}
