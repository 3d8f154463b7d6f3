import { clientOptions, deviceOptions } from "../options/common-options.js";
import { flag, list, oneOf, parsedWithDefault, requiredText, text } from "../options/index.js";
import type { OptionDecl } from "../options/option-decl.js";
import { parseMask, parseThreshold, unitDuration, type MaskRect } from "../visual/flags.js";
import { group, leaf } from "./spec.js";

/**
 * Checks a test makes on a device's screen: `farm assert visual` (the
 * screen against a baseline image) and `farm wait` (until an element
 * appears or goes). In a session (FARM_SESSION) each is one step of the
 * timeline, with its evidence (images, a timeout's diagnosis).
 */

export const VISUAL_ENGINE_WORDS = ["exact", "pixelmatch"] as const;

/**
 * The device flags these checks take: not --request-id (an idempotency key
 * would answer every poll, or every screenshot, with the first answer), nor
 * flags of steps the coordinator records itself: the check is its own step.
 */
const checkDeviceOptions = { ...clientOptions, device: deviceOptions.device, agent: deviceOptions.agent, lease: deviceOptions.lease };

export const assertVisualOptions = {
  ...checkDeviceOptions,
  baseline: requiredText("--baseline <png>", "The expected screen: a PNG of the device's screen size"),
  mask: { ...list("--mask <x,y,w,h>", "Leave this rectangle (pixels from the top left) out of the comparison"), parse: parseMask } as unknown as OptionDecl<MaskRect[]>,
  threshold: parsedWithDefault("--threshold <pct>", "The most that may differ, in percent of the compared (unmasked) pixels", parseThreshold, 0, { defaultText: "0: no pixel may differ" }),
  engine: parsedWithDefault("--engine <engine>", "exact: any RGBA difference counts; pixelmatch: perceptual colour distance 0.1, anti-aliasing ignored", oneOf(VISUAL_ENGINE_WORDS), "exact", { choices: VISUAL_ENGINE_WORDS }),
  outputDir: text(
    "--output-dir <dir>",
    "Write NAME.actual.png and, when they differ, NAME.diff.png here (NAME: the baseline's), readable by you only (a new directory 0700, files 0600); without it no file is written (a session keeps the diff)",
  ),
};
export const assertVisual = leaf({
  name: "visual",
  summary: "Compare the device's screen with a baseline PNG (exit 1 when more than --threshold differs)",
  description: "Takes a screenshot and compares it pixel by pixel with --baseline: masked rectangles are ignored, diffPct is the share of the other pixels that differ. " +
    "Passes when diffPct <= --threshold (exit 0); otherwise exit 1 with passed:false, and a diff image (differences red, masks blue). " +
    "A screen of another size than the baseline never passes (diffPct 100, sizeMismatch). " +
    "With FARM_SESSION the check is a step of the session: the screen compared is its before screenshot, the screen once the check is done its after, and the baseline, the actual screen and the diff are kept with it; a failed check is recorded with the code VISUAL_MISMATCH (also the code in --output json).",
  options: assertVisualOptions,
  examples: [
    "farm assert visual --device SERIAL --baseline login.png",
    "farm assert visual --baseline home.png --mask 0,0,1080,63 --engine pixelmatch --threshold 0.5",
  ],
  load: async () => (await import("../commands/assert-visual.js")).assertVisual,
});

export const assertGroup = group({
  name: "assert",
  summary: "Checks of a device's screen that pass or fail: visual",
  commands: [assertVisual],
});

export const waitOptions = {
  ...checkDeviceOptions,
  // Here --timeout is the whole wait, not each call's deadline.
  timeout: parsedWithDefault("--timeout <duration>", "How long to wait in all (1500ms, 10s, 2m); each poll gets what is left of it, at least 1s", unitDuration(100, 3_600_000), 10_000, { defaultText: "10s" }),
  interval: parsedWithDefault("--interval <duration>", "Pause between two polls of the UI tree", unitDuration(50, 60_000), 250, { defaultText: "250ms" }),
  id: text("--id <resource-id>", "Wait for an element with exactly this resource id"),
  text: text("--text <text>", "Wait for an element whose whole text is exactly this"),
  desc: text("--desc <content-desc>", "Wait for an element with exactly this content description"),
  gone: flag("--gone", "Wait until no element matches instead"),
  appPackage: text("--app-package <pkg>", "Read the tree from this app's SDK instead of UIAutomator"),
  outputDir: text("--output-dir <dir>", "On a timeout, write wait-timeout.json (the poll trace and the screen's elements) here"),
};
export const waitCommand = leaf({
  name: "wait",
  summary: "Wait until an element is on the screen (--id|--text|--desc), or with --gone until none is (exit 1 on timeout)",
  description: "Polls the UI tree every --interval until an element matches exactly (as `farm input tap` matches: zero-size and off-screen elements do not count), or with --gone until none does. " +
    "A failed poll (UI_TREE_FAILED on a locked screen, say) is noted and polling goes on. " +
    "At --timeout the result is COMMAND_TIMEOUT (exit 1) with a diagnosis: the polls, when the tree first had elements, and the elements on the screen then. " +
    "With FARM_SESSION the wait is one step of the session (the polls are not), with the screen before its first poll and after its last as the step's before and after screenshots, and a timeout's diagnosis kept as wait-timeout.json.",
  options: waitOptions,
  examples: ["farm wait --device SERIAL --text \"Sign in\" --timeout 20s", "farm wait --id com.example.app:id/spinner --gone", "farm wait --desc \"Loading\" --gone --output-dir ./diag"],
  load: async () => (await import("../commands/wait.js")).wait,
});
