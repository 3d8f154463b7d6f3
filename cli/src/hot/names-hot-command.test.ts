import { describe, expect, it } from "vitest";
import { parseHot } from "../tree/hot-path.js";
import { namesHotCommand } from "./names-hot-command.js";

/** The installed entry's first look: cheap, and never false for a line the hot path would take. */
const env = { FARM_CONFIG: "/nonexistent/farm-names-hot-command.json", FARM_OUTPUT: "" };

describe("namesHotCommand", () => {
  it("is true for every line the hot path takes, -o/--output anywhere", () => {
    for (const argv of [["devices"], ["-o", "json", "devices"], ["--output=wide", "devices", "--agent", "a"], ["shell", "--", "true"], ["screenshot", "--device", "X"], ["input", "tap", "1", "2"]]) {
      const rest = argv.filter((a, i) => !(a === "-o" || a.startsWith("--output") || argv[i - 1] === "-o"));
      expect(parseHot(rest), argv.join(" ")).toBeDefined();
      expect(namesHotCommand(argv, env), argv.join(" ")).toBe(true);
    }
  });

  it("is false for other commands, the group spellings and help", () => {
    for (const argv of [[], ["lease", "list"], ["device", "shell", "--", "true"], ["--help"], ["--version"], ["agents"], ["-h", "devices"]]) {
      expect(namesHotCommand(argv, env), argv.join(" ")).toBe(false);
    }
  });
});
