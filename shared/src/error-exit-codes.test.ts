import { describe, expect, it } from "vitest";
import { Errors, Exit, exitCodeFor } from "./error-codes.js";

/** The exit codes scripts branch on (docs/cli.md, "Exit codes"): a change here is a breaking change. */
const expected: Record<string, number> = {
  INVALID_ARGUMENT: 64,
  DEVICE_AMBIGUOUS: 64,
  NOT_FOUND: 66,
  DEVICE_NOT_FOUND: 66,
  COORDINATOR_UNAVAILABLE: 69,
  AGENT_OFFLINE: 69,
  DEVICE_OFFLINE: 69,
  NO_DEVICE_AVAILABLE: 69,
  NO_DEVICE_MATCHES: 69,
  INTERNAL: 70,
  EVIDENCE_OUTPUT_EXISTS: 73,
  LEASE_WAIT_TIMEOUT: 75,
  DEVICE_BUSY: 75,
  AGENT_VERSION_INCOMPATIBLE: 76,
  UNAUTHENTICATED: 77,
  PERMISSION_DENIED: 77,
  LEASE_REQUIRED: 77,
  TLS_VERIFY_FAILED: 78,
  // What the test or the app under test did stays 1, as a failing test does.
  ELEMENT_NOT_FOUND: 1,
  VISUAL_MISMATCH: 1,
  COMMAND_TIMEOUT: 1,
};

describe("exit codes", () => {
  it("every error code has one, from the documented set", () => {
    const allowed = new Set<number>(Object.values(Exit));
    for (const spec of Object.values(Errors)) {
      expect(allowed.has(spec.exit), spec.code).toBe(true);
      expect(exitCodeFor(spec.code)).toBe(spec.exit);
    }
  });

  it.each(Object.entries(expected))("%s exits %i", (code, exit) => {
    expect(exitCodeFor(code)).toBe(exit);
  });

  it("only test outcomes share 1 with a failing test; farm's own failures never do", () => {
    const ones = Object.values(Errors).filter((s) => s.exit === 1).map((s) => s.code);
    for (const code of ones) expect(["ELEMENT_NOT_FOUND", "ELEMENT_AMBIGUOUS", "VISUAL_MISMATCH", "COMMAND_TIMEOUT", "INSTALL_FAILED"].includes(code) || code.startsWith("bridge_"), code).toBe(true);
  });

  it("a code this build does not know is a fault in farm (70), never 1", () => {
    expect(exitCodeFor("NO_SUCH_CODE")).toBe(70);
  });
});
