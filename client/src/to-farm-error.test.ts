import { describe, expect, it } from "vitest";
import { Errors, farmError } from "@farm/shared/errors";
import { FarmError } from "./farm-error.js";
import { failureAsSent, toFarmError } from "./to-farm-error.js";

describe("a call's failure as a FarmError", () => {
  it("keeps the coordinator's code, message, field and outcome, and the error as it came for the CLI", () => {
    const sent = farmError(Errors.INVALID_ARGUMENT, "a device serial is required", "target.serial", { dispatched: false, ambiguous: false });
    const wrapped = toFarmError(sent);
    expect(wrapped).toBeInstanceOf(FarmError);
    expect(wrapped).toMatchObject({ code: "INVALID_ARGUMENT", message: "a device serial is required", field: "target.serial" });
    expect(failureAsSent(wrapped)).toBe(sent);
  });

  it("gives a FarmError the library raised itself, and anything else, as it is", () => {
    const own = new FarmError(Errors.INVALID_ARGUMENT, "text must not be empty", "text");
    expect(toFarmError(own)).toBe(own);
    expect(failureAsSent(own)).toBe(own);
    const other = new Error("x");
    expect(failureAsSent(other)).toBe(other);
  });
});
