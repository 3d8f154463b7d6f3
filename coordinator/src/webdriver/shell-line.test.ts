import { describe, expect, it } from "vitest";
import { shellCommandLine } from "./shell-line.js";

describe("shellCommandLine", () => {
  it("keeps safe arguments and single-quotes the rest", () => {
    expect(shellCommandLine("pm", ["list", "packages", "-3"])).toBe("pm list packages -3");
    expect(shellCommandLine("echo", ["a b", "it's", "$HOME", ""])).toBe("echo 'a b' 'it'\\''s' '$HOME' ''");
  });
});
