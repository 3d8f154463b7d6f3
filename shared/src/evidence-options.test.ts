import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { toErrorReport } from "./errors.js";
import { validateOutputDir } from "./evidence-options.js";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "farm-output-dir-"));
  mkdirSync(join(dir, "taken"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

/** The error report (code, field, message) a call throws. */
const fieldOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("did not throw");
};

describe("validateOutputDir", () => {
  it("resolves a relative dir against the working directory", () => {
    vi.spyOn(process, "cwd").mockReturnValue(dir);
    expect(validateOutputDir("./out")).toBe(join(dir, "out"));
    expect(validateOutputDir("out")).toBe(join(dir, "out"));
    expect(validateOutputDir("taken/out")).toBe(join(dir, "taken", "out"));
  });

  it("keeps the other checks for a relative dir: new, with an existing parent, no '..'", () => {
    vi.spyOn(process, "cwd").mockReturnValue(dir);
    expect(fieldOf(() => validateOutputDir("taken"))).toMatchObject({ code: "EVIDENCE_OUTPUT_EXISTS", field: "output-dir" });
    expect(fieldOf(() => validateOutputDir("missing/out")).message).toContain(join(dir, "missing"));
    expect(fieldOf(() => validateOutputDir("../out"))).toMatchObject({ code: "INVALID_ARGUMENT", field: "output-dir" });
    expect(fieldOf(() => validateOutputDir(" "))).toMatchObject({ code: "INVALID_ARGUMENT", field: "output-dir" });
  });

  it("takes an absolute dir as given", () => {
    expect(validateOutputDir(join(dir, "abs"))).toBe(join(dir, "abs"));
    expect(fieldOf(() => validateOutputDir("/"))).toMatchObject({ code: "INVALID_ARGUMENT" });
  });
});
