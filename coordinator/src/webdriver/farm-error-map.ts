import { toErrorReport } from "@farm/shared/errors";
import { WebDriverError, type WebDriverErrorCode } from "./webdriver-error.js";

/**
 * farm's error codes as W3C errors. The farm code leads the message
 * ("LEASE_WAIT_TIMEOUT: …") so a test log says what farm knew; the W3C
 * code is what the client library matches on. Codes not listed are
 * "unknown error" (HTTP 500), still with farm's code first.
 */
const table: Record<string, WebDriverErrorCode> = {
  INVALID_ARGUMENT: "invalid argument",
  MESSAGE_TOO_LARGE: "invalid argument",
  ELEMENT_NOT_FOUND: "no such element",
  ELEMENT_AMBIGUOUS: "invalid selector",
  NOT_IMPLEMENTED: "unsupported operation",
  METHOD_NOT_ALLOWED: "unsupported operation",
  COMMAND_TIMEOUT: "timeout",
  DEADLINE_EXCEEDED: "timeout",
  SCREENSHOT_TRANSFER_FAILED: "unable to capture screen",
  SCREENSHOT_EMPTY: "unable to capture screen",
  SCREENSHOT_NOT_PNG: "unable to capture screen",
  SCREENSHOT_INVALID_PNG: "unable to capture screen",
  SCREENSHOT_TOO_LARGE: "unable to capture screen",
  // The phone is no longer this session's.
  LEASE_EXPIRED: "invalid session id",
  LEASE_RELEASED: "invalid session id",
  LEASE_NOT_FOUND: "invalid session id",
  LEASE_HELD_BY_OTHER: "invalid session id",
  LEASE_REQUIRED: "invalid session id",
};

/** At new session, what keeps a phone from being leased is "session not created" whatever its code. */
const newSessionTable: Record<string, WebDriverErrorCode> = {
  INVALID_ARGUMENT: "invalid argument",
};

/** An error of a farm call (or already a WebDriverError) as the W3C error the client gets. */
export function webDriverErrorOf(err: unknown, during: "new session" | "command" = "command"): WebDriverError {
  if (err instanceof WebDriverError) return err;
  const r = toErrorReport(err);
  const code = during === "new session" ? (newSessionTable[r.code] ?? "session not created") : (table[r.code] ?? "unknown error");
  const field = r.field ? ` (field ${r.field})` : "";
  // A device action whose outcome is unknown says so: the client must not assume it did or did not happen.
  const outcome = r.ambiguous ? "; the outcome is unknown (ambiguous): the phone may or may not have done it" : "";
  return new WebDriverError(code, `${r.code}: ${r.message}${field}${outcome}`);
}
