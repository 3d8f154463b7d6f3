import { describe, expect, it } from "vitest";
import { parsePolicy, PolicyError, validatePolicy, withSiteDefault, type PolicyProblem } from "./policy.js";

/** The problems parsePolicy reports, as "path: message" lines. */
function problems(text: string, source: "yaml" | "json" | "auto" = "auto"): string[] {
  try {
    parsePolicy(text, source);
  } catch (err) {
    expect(err).toBeInstanceOf(PolicyError);
    return (err as PolicyError).problems.map((p: PolicyProblem) => `${p.path}: ${p.message}`);
  }
  throw new Error("expected the policy to be refused");
}

const issueExample = `
capture: [screenshot.before]          # default, every step
capturePolicy:
  - on: {action: tap, idMatches: "*:id/checkout*"}
    capture: [deviceLog, elements.after]
  - on: {event: screenChanged}
    capture: [elements]
  - on: {result: error}
    capture: [deviceLog, video]
redact: {labels: [password], fields: [token], headers: [x-session], unmaskHeaders: []}
secrets: [CI_API_TOKEN]
log: {filterspec: "*:W", package: com.example.app}
`;

describe("parsePolicy", () => {
  it("reads the issue's example as written", () => {
    const p = parsePolicy(issueExample, "yaml");
    expect(p.capture).toEqual(["screenshot.before"]);
    expect(p.capturePolicy?.[0]).toEqual({ on: { action: "tap", idMatches: "*:id/checkout*" }, capture: ["deviceLog", "elements.after"] });
    expect(p.capturePolicy?.[2]?.on).toEqual({ result: "error" });
    expect(p.secrets).toEqual(["CI_API_TOKEN"]);
    expect(p.log).toEqual({ filterspec: "*:W", package: "com.example.app" });
  });

  it("reads JSON, and YAML 1.2 (where `on` is a key, not true)", () => {
    const json = JSON.stringify({ capturePolicy: [{ on: { result: "error" }, capture: ["video"] }] });
    expect(parsePolicy(json, "json")).toEqual(parsePolicy(json, "auto"));
    expect(parsePolicy("capturePolicy:\n  - on:\n      event: screenChanged\n    capture: [elements]\n", "yaml").capturePolicy?.[0]?.on).toEqual({ event: "screenChanged" });
  });

  it("takes an empty mapping: only the baseline", () => {
    expect(parsePolicy("{}")).toEqual({});
  });

  it("lists every problem with its path, rule numbers next to rule paths", () => {
    const got = problems(`
capture: [screenshot.during]
capturePolicy:
  - on: {action: tap}
    capture: [elements]
  - on: {event: screenChanged, idMatches: "*:id/x"}
    capture: [elements]
  - on: {action: tap, result: error}
    capture: []
secrets: [CI_API_TOKEN, CI_API_TOKEN, 9LIVES]
log: {package: app}
colour: blue
`);
    expect(got).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^capture\[0\]: "screenshot\.during" is not a capture token: .*allowed: screenshot\[\.before\|\.after\|\.around\]/),
        "capturePolicy[1].on.idMatches: idMatches is allowed only with action (rule 2)",
        "capturePolicy[2].on: has 2 triggers (action, result); a rule has exactly one (rule 3)",
        "capturePolicy[2].capture: needs at least 1 capture token (rule 3)",
        "secrets: \"CI_API_TOKEN\" is listed twice (items 0 and 1)",
        "secrets[2]: \"9LIVES\" is not an environment variable name",
        "log.package: \"app\" is not an Android package name (com.example.app)",
        "colour: unknown key; allowed here: $schema, capture, capturePolicy, redact, secrets, log",
      ]),
    );
    expect(got).toHaveLength(8);
  });

  it("names a rule without a trigger, and required keys", () => {
    expect(problems("capturePolicy:\n  - on: {}\n    capture: [video]\n  - capture: [video]\n")).toEqual([
      "capturePolicy[0].on: needs a trigger: action, event or result (rule 1)",
      "capturePolicy[1].on: is required (rule 2)",
    ]);
  });

  it("refuses unknown keys at every level", () => {
    expect(problems("capturePolicy:\n  - on: {action: tap, id: x}\n    capture: [video]\n    why: test\nredact: {label: [a]}\nlog: {level: W}\n")).toEqual([
      "capturePolicy[0].why: unknown key; allowed here: on, capture (rule 1)",
      "capturePolicy[0].on.id: unknown key; allowed here: action, idMatches, event, result (rule 1)",
      "redact.label: unknown key; allowed here: labels, fields, headers, unmaskHeaders",
      "log.level: unknown key; allowed here: filterspec, package",
    ]);
  });

  it("points at the policy's word for text input", () => {
    expect(problems("capturePolicy: [{on: {action: text}, capture: [elements]}]")[0]).toContain("the policy calls text input `type`");
    expect(problems("capturePolicy: [{on: {action: longpress}, capture: [elements]}]")[0]).toContain("did you mean longPress?");
    expect(problems("capturePolicy: [{on: {event: screenchanged}, capture: [elements]}]")[0]).toContain("did you mean screenChanged?");
  });

  it("enforces its limits: 100 rules, 50 tokens a list, 64 secrets, bounded strings", () => {
    const rule = { on: { action: "tap" }, capture: ["elements"] };
    expect(() => validatePolicy({ capturePolicy: Array(100).fill(rule) })).not.toThrow();
    expect(problems(JSON.stringify({ capturePolicy: Array(101).fill(rule) }))).toEqual(["capturePolicy: at most 100 rules (got 101)"]);
    expect(problems(JSON.stringify({ capture: Array(51).fill("elements") }))).toEqual(["capture: at most 50 capture tokens (got 51)"]);
    const secrets = Array.from({ length: 65 }, (_, i) => `S${i}`);
    expect(problems(JSON.stringify({ secrets }))).toEqual(["secrets: at most 64 secret names (got 65)"]);
    expect(problems(JSON.stringify({ capturePolicy: [{ on: { action: "tap", idMatches: "x".repeat(257) }, capture: ["video"] }] }))).toEqual([
      "capturePolicy[0].on.idMatches: at most 256 characters (got 257) (rule 1)",
    ]);
    expect(problems(JSON.stringify({ redact: { fields: ["f".repeat(257)] } }))).toEqual(["redact.fields[0]: at most 256 characters (got 257)"]);
    expect(problems(JSON.stringify({ secrets: ["A".repeat(129)] }))[0]).toMatch(/^secrets\[0\]: .* is not an environment variable name$/);
    expect(problems("x".repeat(256 * 1024 + 1))[0]).toMatch(/^\(file\): is \d+ bytes; at most 262144$/);
  });

  it("holds secret names only, never values", () => {
    expect(problems("secrets: [{CI_API_TOKEN: hunter2}]")).toEqual(["secrets[0]: must be a string"]);
    expect(problems("secrets: ['CI_API_TOKEN=hunter2']")[0]).toContain("is not an environment variable name");
  });

  it("refuses a deviceLog filterspec the phone's shell could read as more than TAG:LEVEL pairs", () => {
    expect(parsePolicy("log: {filterspec: \"*:S ActivityManager:I my.tag-2:V\"}").log?.filterspec).toBe("*:S ActivityManager:I my.tag-2:V");
    for (const bad of ["*:W; reboot", "*:W && reboot", "$(reboot):W", "*:X", "*", "*:W  "]) expect(problems(`log: {filterspec: ${JSON.stringify(bad)}}`)[0], bad).toMatch(/^log\.filterspec: .* is not a logcat filterspec/);
  });

  it("reports syntax errors with their line, and refuses duplicate keys", () => {
    expect(problems("capture: [elements\n")[0]).toMatch(/^\(line \d+, column \d+\): /);
    expect(problems("capture: [elements]\ncapture: [video]\n")).toEqual(["(line 2, column 1): Map keys must be unique"]);
    expect(problems("{\"capture\": [", "json")[0]).toMatch(/^\(json\): /);
  });

  it("says to quote a glob that YAML reads as an alias", () => {
    expect(problems("capturePolicy:\n  - on: {action: tap, idMatches: *:id/checkout*}\n    capture: [video]\n")[0]).toContain("quote globs, idMatches: \"*:id/checkout*\"");
  });

  it("wants a mapping at the top", () => {
    expect(problems("")).toEqual(["(policy): must be a mapping (object)"]);
    expect(problems("[screenshot]")).toEqual(["(policy): must be a mapping (object)"]);
  });

  it("puts everything in the error's message, one problem a line", () => {
    try {
      parsePolicy("capture: [nope]\nfoo: 1\n");
    } catch (err) {
      expect((err as Error).message.split("\n")).toEqual([
        "the session policy is not valid:",
        expect.stringMatching(/^ {2}foo: unknown key/),
        expect.stringMatching(/^ {2}capture\[0\]: "nope" is not a capture token/),
      ]);
    }
  });
});

describe("withSiteDefault", () => {
  it("fills the default list only when the policy has none (an empty list is a choice)", () => {
    expect(withSiteDefault({}, ["elements"]).capture).toEqual(["elements"]);
    expect(withSiteDefault({ capture: [] }, ["elements"]).capture).toEqual([]);
    expect(withSiteDefault({ capture: ["video"] }, ["elements"]).capture).toEqual(["video"]);
    expect(withSiteDefault({}, undefined)).toEqual({});
  });
});
