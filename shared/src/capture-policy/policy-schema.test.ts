import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Ajv2020 } from "ajv/dist/2020.js";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { parsePolicy, policyProblems } from "./policy.js";
import { sessionPolicySchema } from "./policy-schema.js";

const doc = fileURLToPath(new URL("../../../docs/session-policy.schema.json", import.meta.url));
const fixtures = fileURLToPath(new URL("../../../test/fixtures/session-policy/", import.meta.url));

/** Every policy fixture: valid/ and invalid/, and the checkout example. */
function fixtureFiles(): { name: string; value: unknown; valid: boolean | undefined }[] {
  const read = (path: string) => parseYaml(readFileSync(path, "utf8")) as unknown;
  const dir = (sub: "valid" | "invalid") => readdirSync(fixtures + sub).map((f) => ({ name: `${sub}/${f}`, value: read(`${fixtures}${sub}/${f}`), valid: sub === "valid" }));
  return [...dir("valid"), ...dir("invalid"), { name: "checkout.policy.yaml", value: read(fixtures + "checkout.policy.yaml"), valid: true }];
}

/** Generated edge cases, on either side of each limit. */
const generated: { name: string; value: unknown }[] = [
  { name: "100 rules", value: { capturePolicy: Array(100).fill({ on: { action: "tap" }, capture: ["elements"] }) } },
  { name: "101 rules", value: { capturePolicy: Array(101).fill({ on: { action: "tap" }, capture: ["elements"] }) } },
  { name: "50 tokens", value: { capture: Array(50).fill("video") } },
  { name: "51 tokens", value: { capture: Array(51).fill("video") } },
  { name: "64 secrets", value: { secrets: Array.from({ length: 64 }, (_, i) => `S${i}`) } },
  { name: "65 secrets", value: { secrets: Array.from({ length: 65 }, (_, i) => `S${i}`) } },
  { name: "idMatches of 256", value: { capturePolicy: [{ on: { action: "tap", idMatches: "x".repeat(256) }, capture: ["video"] }] } },
  { name: "idMatches of 257", value: { capturePolicy: [{ on: { action: "tap", idMatches: "x".repeat(257) }, capture: ["video"] }] } },
  { name: "empty idMatches", value: { capturePolicy: [{ on: { action: "tap", idMatches: "" }, capture: ["video"] }] } },
  { name: "idMatches with result", value: { capturePolicy: [{ on: { result: "error", idMatches: "*" }, capture: ["video"] }] } },
  { name: "three triggers", value: { capturePolicy: [{ on: { action: "tap", event: "screenChanged", result: "error" }, capture: ["video"] }] } },
  { name: "result ok", value: { capturePolicy: [{ on: { result: "ok" }, capture: ["video"] }] } },
  {
    name: "every token",
    value: { capture: ["screenshot", "screenshot.before", "screenshot.after", "screenshot.around", "elements", "elements.before", "elements.after", "elements.around", "video", "video.around", "deviceLog", "deviceLog.around", "actionLog"] },
  },
  { name: "actionLog.after", value: { capture: ["actionLog.after"] } },
  { name: "a number token", value: { capture: [1] } },
  { name: "null", value: null },
  { name: "a string", value: "capture" },
  { name: "$schema only", value: { $schema: "https://farm.dev/schemas/session-policy-v1.json" } },
  { name: "header with a space", value: { redact: { headers: ["x session"] } } },
  { name: "package without a dot", value: { log: { package: "app" } } },
];

describe("the session policy schema", () => {
  it("is published in docs/ exactly as the code validates with", () => {
    // After a deliberate change: npx tsc -b shared && node -e 'import("./shared/dist/capture-policy/policy-schema.js").then(m => require("fs").writeFileSync("docs/session-policy.schema.json", JSON.stringify(m.sessionPolicySchema, null, 2) + "\n"))'
    expect(JSON.parse(readFileSync(doc, "utf8"))).toEqual(JSON.parse(JSON.stringify(sessionPolicySchema)));
  });

  it("agrees with the code on every fixture: the published file decides, a third-party validator concurs", () => {
    // A validator that knows nothing of farm, reading the file from docs/ with its default options.
    const published = new Ajv2020().compile(JSON.parse(readFileSync(doc, "utf8")) as object);
    const cases = [...fixtureFiles(), ...generated.map((g) => ({ ...g, valid: undefined }))];
    expect(cases.length).toBeGreaterThan(30);
    for (const c of cases) {
      const byCode = policyProblems(c.value).length === 0;
      expect(byCode, `${c.name}: ${JSON.stringify(policyProblems(c.value))}`).toBe(published(c.value));
      if (c.valid !== undefined) expect(byCode, c.name).toBe(c.valid);
    }
  });

  it("reads each fixture file the same from its text as from its value", () => {
    for (const c of fixtureFiles()) {
      const file = fixtures + c.name;
      const text = readFileSync(file, "utf8");
      let ok = true;
      try {
        parsePolicy(text, file.endsWith(".json") ? "json" : "yaml");
      } catch {
        ok = false;
      }
      expect(ok, c.name).toBe(c.valid);
    }
  });
});
