import { describe, expect, it } from "vitest";
import { createPrinter, exitCodeOf, type OutputFormat } from "./output.js";

describe("exit codes follow what was printed", () => {
  for (const format of ["json", "pretty"] as OutputFormat[]) {
    it(`${format}: a command that printed ok:false exits non-zero even if it returned 0`, () => {
      let out = "";
      const printer = createPrinter(format, (s) => (out += s), (s) => (out += s));
      printer.result({ released: false }, () => "nothing released");
      expect(exitCodeOf(0, printer)).toBe(0);
      // result() spreads the data after its ok:true, so data carrying ok:false prints ok:false.
      printer.result({ ok: false, code: "EVIDENCE_CAPTURE_FAILED" }, () => "failed");
      if (format === "json") expect(out).toContain("\"ok\":false");
      // The failure's code decides (69: the farm could not serve it); a code the command chose stands.
      expect(exitCodeOf(0, printer)).toBe(69);
      expect(exitCodeOf(3, printer)).toBe(3);
    });
  }

  it("emit and failure count too; nested ok:false does not", () => {
    const emitted = createPrinter("json", () => undefined);
    emitted.emit({ ok: true, session: { ok: false } }, () => "");
    expect(exitCodeOf(0, emitted)).toBe(0);
    emitted.emit({ ok: false, code: "EVIDENCE_VERIFY_FAILED" }, () => "");
    expect(exitCodeOf(0, emitted)).toBe(65);
    // The first failure's code is the one that counts.
    emitted.failure({ ok: false, code: "INTERNAL", message: "x" });
    expect(exitCodeOf(0, emitted)).toBe(65);
    const failing = createPrinter("pretty", () => undefined, () => undefined);
    failing.failure({ ok: false, code: "INTERNAL", message: "x" });
    expect(exitCodeOf(0, failing)).toBe(70);
  });

  it("an ok:false without an error code exits 1", () => {
    const printer = createPrinter("json", () => undefined);
    printer.emit({ ok: false, status: "failed" }, () => "");
    expect(exitCodeOf(0, printer)).toBe(1);
  });
});
