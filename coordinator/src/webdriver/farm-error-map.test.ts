import { describe, expect, it } from "vitest";
import { Errors, farmError } from "@farm/shared/errors";
import { webDriverErrorOf } from "./farm-error-map.js";
import { WebDriverError } from "./webdriver-error.js";

describe("webDriverErrorOf", () => {
  it("puts farm's code first and picks the W3C code", () => {
    const e = webDriverErrorOf(farmError(Errors.ELEMENT_NOT_FOUND, "no element with text OK", "selector"));
    expect(e.code).toBe("no such element");
    expect(e.httpStatus).toBe(404);
    expect(e.message).toBe("ELEMENT_NOT_FOUND: no element with text OK (field selector)");
    expect(webDriverErrorOf(farmError(Errors.DEVICE_OFFLINE, "gone")).toJSON().value).toEqual({ error: "unknown error", message: "DEVICE_OFFLINE: gone", stacktrace: "" });
    expect(webDriverErrorOf(farmError(Errors.DEVICE_OWNERSHIP_UNRESOLVED, "journal")).message).toMatch(/^DEVICE_OWNERSHIP_UNRESOLVED: /);
    expect(webDriverErrorOf(farmError(Errors.LEASE_EXPIRED, "expired")).code).toBe("invalid session id");
    expect(webDriverErrorOf(farmError(Errors.SCREENSHOT_INVALID_PNG, "bad")).code).toBe("unable to capture screen");
  });

  it("at new session a phone that cannot be leased is session not created; a bad argument stays a 400", () => {
    for (const spec of [Errors.LEASE_WAIT_TIMEOUT, Errors.NO_DEVICE_MATCHES, Errors.NO_DEVICE_AVAILABLE, Errors.UNAUTHENTICATED]) {
      const e = webDriverErrorOf(farmError(spec, "x"), "new session");
      expect(e.code).toBe("session not created");
      expect(e.message).toBe(`${spec.code}: x`);
    }
    expect(webDriverErrorOf(farmError(Errors.INVALID_ARGUMENT, "x", "selector.serial"), "new session").httpStatus).toBe(400);
  });

  it("an unknown outcome is said, and a WebDriverError passes as it is", () => {
    const ambiguous = farmError(Errors.DEVICE_OFFLINE, "lost mid-call", undefined, { dispatched: null, ambiguous: true });
    expect(webDriverErrorOf(ambiguous).message).toContain("outcome is unknown");
    const own = new WebDriverError("stale element reference", "gone");
    expect(webDriverErrorOf(own)).toBe(own);
  });
});
