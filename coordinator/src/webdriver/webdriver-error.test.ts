import { describe, expect, it } from "vitest";
import { isWebDriverErrorCode, WebDriverError } from "./webdriver-error.js";

describe("WebDriverError", () => {
  it("carries the W3C status and body", () => {
    const error = new WebDriverError("no such element", "ELEMENT_NOT_FOUND: no element matched id=foo");
    expect(error.httpStatus).toBe(404);
    expect(error.toJSON()).toEqual({ value: { error: "no such element", message: "ELEMENT_NOT_FOUND: no element matched id=foo", stacktrace: "" } });
    expect(new WebDriverError("unknown method", "x").httpStatus).toBe(405);
    expect(new WebDriverError("session not created", "x").httpStatus).toBe(500);
  });

  it("knows only W3C codes", () => {
    expect(isWebDriverErrorCode("stale element reference")).toBe(true);
    expect(isWebDriverErrorCode("toString")).toBe(false);
    expect(isWebDriverErrorCode("no such thing")).toBe(false);
  });
});
