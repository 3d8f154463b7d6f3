import { describe, expect, it } from "vitest";
import { CliError } from "./cli-error.js";
import { parseFlags, type OptionSpec } from "./args.js";

const options: OptionSpec = {
  device: { type: "string" },
  label: { type: "string", multiple: true },
  verbose: { type: "boolean" },
  help: { type: "boolean", short: "h" },
};

function refusal(args: string[], allowPositionals = false): CliError {
  try {
    parseFlags(args, options, allowPositionals);
  } catch (err) {
    return err as CliError;
  }
  throw new Error(`parseFlags accepted ${args.join(" ")}`);
}

describe("parseFlags", () => {
  it("refuses a single-value flag given twice, in any spelling, naming the flag", () => {
    for (const args of [
      ["--device", "A", "--device", "B"],
      ["--device=A", "--device", "B"],
      ["--device", "A", "--device=A"],
    ]) {
      const err = refusal(args);
      expect(err, args.join(" ")).toBeInstanceOf(CliError);
      expect(err, args.join(" ")).toMatchObject({ code: "INVALID_ARGUMENT", field: "device" });
      expect(err.message).toMatch(/--device/);
    }
  });

  it("keeps repeatable flags repeatable and reads a single flag once", () => {
    const p = parseFlags(["--device", "A", "--label", "a=1", "--label", "b=2", "--verbose"], options);
    expect(p.values).toMatchObject({ device: "A", label: ["a=1", "b=2"], verbose: true });
  });

  it("does not count words after -- as flags", () => {
    const p = parseFlags(["--device", "A", "--", "--device", "B"], options, true);
    expect(p.values["device"]).toBe("A");
    expect(p.positionals).toEqual(["--device", "B"]);
  });

  it("still reports unknown flags with their name", () => {
    expect(refusal(["--nope", "x"])).toMatchObject({ code: "INVALID_ARGUMENT", field: "nope" });
  });
});
