import { describe, expect, it } from "vitest";
import { CAPTURE_TOKENS, CaptureTokenError, capturePoints, captureTokenProblem, isHeavy, parseCaptureToken } from "./capture-token.js";

describe("capture tokens", () => {
  it("apply the defaults: instant kinds after, interval kinds around", () => {
    expect(parseCaptureToken("screenshot")).toEqual({ kind: "screenshot", when: "after", token: "screenshot.after" });
    expect(parseCaptureToken("elements")).toEqual({ kind: "elements", when: "after", token: "elements.after" });
    expect(parseCaptureToken("video")).toEqual({ kind: "video", when: "around", token: "video.around" });
    expect(parseCaptureToken("deviceLog")).toEqual({ kind: "deviceLog", when: "around", token: "deviceLog.around" });
  });

  it("keep an explicit modifier", () => {
    expect(parseCaptureToken("screenshot.before")?.token).toBe("screenshot.before");
    expect(parseCaptureToken("elements.around")?.when).toBe("around");
    expect(parseCaptureToken("deviceLog.around")?.token).toBe("deviceLog.around");
  });

  it("accept actionLog as a no-op (the step record is the action log)", () => {
    expect(parseCaptureToken("actionLog")).toBeNull();
    expect(capturePoints(["actionLog"])).toEqual([]);
  });

  it("refuse anything else, naming the token and the allowed forms", () => {
    for (const bad of ["video.before", "deviceLog.after", "screenshot.during", "Video", "elements.after.x", "actionLog.after", "", "screen"]) {
      expect(() => parseCaptureToken(bad), bad).toThrow(CaptureTokenError);
      const message = captureTokenProblem(bad) ?? "";
      expect(message).toContain(JSON.stringify(bad));
      expect(message).toContain("screenshot[.before|.after|.around]");
      expect(message).toContain("deviceLog[.around]");
    }
    expect(captureTokenProblem("Video")).toContain("did you mean video?");
    expect(captureTokenProblem("video.before")).toContain("runs around the action");
    expect(captureTokenProblem(3)).toContain("must be a string");
  });

  it("lists every accepted spelling once, and each parses", () => {
    expect(new Set(CAPTURE_TOKENS).size).toBe(CAPTURE_TOKENS.length);
    for (const t of CAPTURE_TOKENS) expect(captureTokenProblem(t), t).toBeNull();
  });

  it("split an instant `around` into its before and after points, dropping duplicates", () => {
    expect(capturePoints(["elements.around", "elements", "video", "video.around"]).map((p) => p.token)).toEqual(["elements.before", "elements.after", "video.around"]);
  });

  it("call video and deviceLog heavy, screenshots and elements light", () => {
    expect([isHeavy("video"), isHeavy("deviceLog"), isHeavy("screenshot"), isHeavy("elements")]).toEqual([true, true, false, false]);
  });
});
