import { describe, expect, it } from "vitest";
import { isStepMarkerLine, withoutStepMarkers } from "./step-markers.js";

describe("step markers", () => {
  it("drops farm's begin and end lines and keeps the user's, including one that merely mentions the tag", () => {
    const log = [
      "12-07 07:15:17.370     1     1 I init: starting service 'adbd'...",
      "12-07 07:15:18.447  2000  2000 I farmstep: begin ebff644a69b6",
      "12-07 07:15:18.497  2000  2000 I MyApp: farmstep: begin ebff644a69b6 is what the test saw",
      "12-07 07:15:18.504  2000  2000 I farmstep: end ebff644a69b6",
      "",
    ].join("\n");
    expect(withoutStepMarkers(log)).toBe([
      "12-07 07:15:17.370     1     1 I init: starting service 'adbd'...",
      "12-07 07:15:18.497  2000  2000 I MyApp: farmstep: begin ebff644a69b6 is what the test saw",
      "",
    ].join("\n"));
  });

  it("a user's own line under the tag that is not a marker stays", () => {
    expect(isStepMarkerLine("12-07 07:15:18.447  2000  2000 I farmstep: something else")).toBe(false);
    expect(isStepMarkerLine("12-07 07:15:18.447  2000  2000 I farmstep: end ebff644a69b6\r")).toBe(true);
  });
});
