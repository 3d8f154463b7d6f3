import { describe, expect, it } from "vitest";
import { takeOutputFormat } from "./output-format.js";

const env = { FARM_CONFIG: "/nonexistent/farm/config.json" };

describe("takeOutputFormat", () => {
  it("takes -o/--output json|pretty|wide anywhere before --, and leaves other values for the command", () => {
    expect(takeOutputFormat(["devices", "-o", "wide"], env)).toMatchObject({ format: "wide", rest: ["devices"] });
    expect(takeOutputFormat(["-owide", "devices"], env)).toMatchObject({ format: "wide", rest: ["devices"] });
    expect(takeOutputFormat(["devices", "--output=pretty"], env)).toMatchObject({ format: "pretty", rest: ["devices"] });
    expect(takeOutputFormat(["screenshot", "--output", "shot.png"], env, false)).toMatchObject({ format: "json", rest: ["screenshot", "--output", "shot.png"] });
    expect(takeOutputFormat(["shell", "--", "x", "-o", "pretty"], env, false)).toMatchObject({ format: "json", rest: ["shell", "--", "x", "-o", "pretty"] });
  });

  it("resolves flag > FARM_OUTPUT > default (pretty on a terminal, else json), and flags bad or repeated values", () => {
    expect(takeOutputFormat(["devices", "-o", "json"], { ...env, FARM_OUTPUT: "pretty" }).format).toBe("json");
    expect(takeOutputFormat(["devices"], { ...env, FARM_OUTPUT: "wide" }).format).toBe("wide");
    expect(takeOutputFormat(["devices"], env, true).format).toBe("pretty");
    expect(takeOutputFormat(["devices"], env, false).format).toBe("json");
    expect(takeOutputFormat(["devices"], { ...env, FARM_OUTPUT: "yaml" })).toMatchObject({ bad: "yaml" });
    expect(takeOutputFormat(["devices", "-o", "json", "--output", "pretty"], env)).toMatchObject({ format: "json", repeated: true });
  });
});
