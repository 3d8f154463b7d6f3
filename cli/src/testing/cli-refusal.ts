import { expect } from "vitest";
import { CliError } from "../cli-error.js";

/** For tests: the CliError `fn` throws (a usage refusal); fails the test when it throws nothing or something else. */
export function cliRefusal(fn: () => unknown): CliError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CliError);
    return err as CliError;
  }
  throw new Error("expected a refusal");
}
