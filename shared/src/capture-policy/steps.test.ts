import { describe, expect, it } from "vitest";
import { DocumentError } from "./schema-errors.js";
import { parseSteps } from "./steps.js";

function problems(text: string): string[] {
  try {
    parseSteps(text);
  } catch (err) {
    expect(err).toBeInstanceOf(DocumentError);
    return (err as DocumentError).problems.map((p) => `${p.path}: ${p.message}`);
  }
  throw new Error("expected the steps to be refused");
}

describe("steps files", () => {
  it("read a list of steps, numbered from 1, with defaults", () => {
    expect(parseSteps("- {action: tap, id: \"a:id/b\", screenChanged: true}\n- {action: shell, failed: true}\n- {action: type, capture: [deviceLog]}\n")).toEqual([
      { sequence: 1, action: "tap", targetId: "a:id/b", screenChanged: true, failed: false },
      { sequence: 2, action: "shell", targetId: "", screenChanged: false, failed: true },
      { sequence: 3, action: "text", targetId: "", screenChanged: false, failed: false, capture: ["deviceLog"] },
    ]);
    expect(parseSteps("[{\"action\": \"wait\"}]", "json")).toHaveLength(1);
    expect(parseSteps("[]")).toEqual([]);
  });

  it("list every problem with its path", () => {
    expect(problems("- {action: tapp}\n- {id: x}\n- {action: tap, screenChanged: yes, when: now}\n- {action: tap, capture: [video.after]}\n- hello\n")).toEqual([
      "steps[0].action: \"tapp\" is not one of: tap, swipe, text, key, shell, setprop, install, reboot, app-endpoint, remove-forward, ui-tree, evidence, assert-visual, wait, type, longPress",
      "steps[1].action: is required",
      "steps[2].when: unknown key; allowed here: action, id, screenChanged, failed, capture",
      "steps[2].screenChanged: must be true or false",
      expect.stringMatching(/^steps\[3\]\.capture\[0\]: "video\.after" is not a capture token/),
      "steps[4]: must be a mapping (object)",
    ]);
    expect(problems("action: tap")).toEqual(["steps: must be a list"]);
  });

  it("cap a long list of problems", () => {
    const got = problems(Array(80).fill("- {action: nope}").join("\n"));
    expect(got).toHaveLength(51);
    expect(got[50]).toBe("…: and 30 more problems");
  });
});
