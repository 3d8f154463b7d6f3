import { clientOptions, leasedDeviceOptions } from "../options/common-options.js";
import { flag, list, oneOf, parsed, parsedWithDefault, requiredText, text } from "../options/index.js";
import { group, leaf } from "./spec.js";

export const SESSION_END_STATUSES = ["passed", "failed"] as const;
export const SESSION_STATUSES = ["running", "passed", "failed", "lease-ended"] as const;

/** The session a command acts on: `farm session start` prints the export line for it. */
export const sessionIdOption = { session: text("--session <id>", "Session id (farm session start)", { env: "FARM_SESSION" }) };

/** A session's capture policy and the secrets it masks (also on `farm lease run --session`). */
export const sessionPolicyOptions = {
  policy: text("--policy <file>", "Capture policy, YAML or JSON (docs/session-policy.md): what evidence each step keeps, what is masked"),
  secret: list("--secret <name>", "Mask this environment variable's value in everything the session stores (repeatable)"),
};

export const sessionStartOptions = {
  ...clientOptions,
  ...leasedDeviceOptions,
  device: text("--device <serial>", "Device serial; your lease must be on it", { env: "FARM_DEVICE" }),
  name: text("--name <text>", "A name shown in lists (at most 200 characters)"),
  ocr: flag("--ocr", "OCR each step's before screenshot (farm session show lists what was read)"),
  contextJson: text("--context-json <object>", "A JSON object stored with the session (build, branch, test)"),
  ...sessionPolicyOptions,
};
export const sessionEndOptions = {
  ...clientOptions,
  ...sessionIdOption,
  status: { ...parsedWithDefault("--status <status>", "How it ended: passed or failed", oneOf(SESSION_END_STATUSES), "passed", { choices: SESSION_END_STATUSES }), defaultText: "passed" },
};
export const sessionListOptions = {
  ...clientOptions,
  device: text("--device <serial>", "Only sessions on this device (any of its serials)"),
  status: parsed("--status <status>", "Only sessions in this status", oneOf(SESSION_STATUSES), { choices: SESSION_STATUSES }),
  user: text("--user <name>", "Only sessions this token name started"),
};
export const sessionShowOptions = clientOptions;
export const sessionExportOptions = { ...clientOptions, outputDir: text("--output-dir <dir>", "A new directory (relative to the working directory, or absolute) (or give it as DIR)") };
export const sessionExplainOptions = {
  ...clientOptions,
  policy: requiredText("--policy <file>", "Session policy file, YAML or JSON (docs/session-policy.schema.json)"),
  steps: text("--steps <file>", "Scenario to explain it over: a YAML or JSON list of {action, id, screenChanged, failed}"),
  session: text("--session <id>", "Recorded session to explain it over, instead of --steps", { env: "FARM_SESSION" }),
};

export const sessionGroup = group({
  name: "session",
  summary: "Recorded sessions on a leased device: start, end, list, show, export",
  commands: [
    leaf({
      name: "start",
      summary: "Start a session on your leased device; prints its id (and, pretty, the FARM_SESSION export line)",
      options: sessionStartOptions,
      examples: ["farm session start --device emulator-5554 --name checkout-flow --context-json '{\"build\":\"1.2.3\"}'"],
      load: async () => (await import("../commands/session.js")).startSession,
    }),
    leaf({
      name: "end",
      summary: "End a session as passed or failed (its owner or an admin)",
      options: sessionEndOptions,
      examples: ["farm session end --status failed"],
      load: async () => (await import("../commands/session.js")).endSession,
    }),
    leaf({ name: "list", summary: "Sessions, newest first", options: sessionListOptions, load: async () => (await import("../commands/session.js")).listSessions }),
    leaf({
      name: "show",
      summary: "One session and its timeline: each step's action, result, duration, before/after screenshots and OCR",
      description: "One line per step, oldest first: `#SEQ  ACTION  DESCRIPTION  → ok | CODE: message  (N ms)  before:SHA8  after:SHA8  ocr:STATUS(WORDS)`; " +
        "a screenshot that could not be taken shows as failed(CODE), none as –. " +
        "JSON: {session, steps}, each step in protobuf JSON (farm.v1.SessionStep); `farm session export` fetches the screenshots.",
      args: [{ name: "id", description: "The session id", required: true }],
      options: sessionShowOptions,
      examples: ["farm session show SESSION_ID", "farm session show SESSION_ID -o json"],
      load: async () => (await import("../commands/session.js")).showSession,
    }),
    leaf({
      name: "export",
      summary: "Write a session's timeline and every screenshot it shows into a new directory, verifiable offline (farm evidence verify)",
      description: "The directory gets timeline.json (the session and every step in protobuf JSON, each screenshot's `file` a relative path), " +
        "images/SHA256.png per stored screenshot (each checked against its sha256 and size), images/evidence-ID-FILE for a still bundle's screenshot, " +
        "and manifest.json (kind farm-session-export) listing every file with its size and sha256. " +
        "DIR must not exist; it is created (0700) only once the session is found and removed again if the export fails.",
      args: [
        { name: "id", description: "The session id", required: true },
        { name: "dir", description: "A new directory (relative to the working directory, or absolute)" },
      ],
      options: sessionExportOptions,
      examples: ["farm session export SESSION_ID /abs/new/dir", "farm session export SESSION_ID --output-dir /abs/new/dir", "farm evidence verify /abs/new/dir"],
      load: async () => (await import("../commands/session-export.js")).exportSession,
    }),
    leaf({
      name: "explain",
      summary: "Dry-run a capture policy over a steps file or a recorded session: where each rule fires, what it would store, warnings",
      description: "Reads the policy (validated against docs/session-policy.schema.json, every problem listed with its path) and a scenario: " +
        "--steps FILE, a list of {action, id?, screenChanged?, failed?}, or --session ID, whose recorded steps are read (target id from the element selector, " +
        "else the resolved element; failed when not ok; screenChanged when the before and after screenshots differ). " +
        "Prints one row per rule (trigger, captures, how many steps it fires on and which, estimated bytes), ⚠ warnings for heavy captures " +
        "(video, deviceLog) on broad rules or speculated on many steps, and estimated storage per kind. Changes nothing. See docs/session-policy.md.",
      options: sessionExplainOptions,
      examples: ["farm session explain --policy policy.yaml --steps steps.yaml", "farm session explain --policy policy.yaml --session SESSION_ID -o json"],
      load: async () => (await import("../commands/session-explain.js")).explainSession,
    }),
  ],
});
