import { clientOptions, connectionOptions, leasedDeviceOptions } from "../options/common-options.js";
import { hidden, requiredText, text } from "../options/index.js";
import { group, leaf } from "./spec.js";

const outputDir = (what: string) => hidden(text("--output-dir <dir>", `${what} (old spelling of DIR)`));

// --timeout here is the device-work budget, not each call's deadline.
export const captureOptions = {
  ...connectionOptions,
  device: requiredText("--device <serial>", "Device serial, or a physical id (a unique prefix is enough, as farm devices shows it)", { env: "FARM_DEVICE" }),
  agent: text("--agent <name>", "Agent name or id, for a serial on two hosts"),
  // A leased phone's evidence is its holder's: the lease token shows you hold it under another token.
  lease: leasedDeviceOptions.lease,
  label: text("--label <text>", "A label stored in the manifest"),
  contextJson: text("--context-json <object>", "A JSON object stored in the manifest"),
  timeout: { ...text("--timeout <ms>", "Budget for the device work, in milliseconds"), defaultText: "the coordinator's" },
  appPackage: text("--app-package <pkg>", "Take the hierarchy from this app's own tree (app SDK)"),
  outputDir: outputDir("A new directory (relative to the working directory, or absolute) for the bundle"),
};
export const evidenceCapture = leaf({
  name: "capture",
  summary: "Capture a still evidence bundle (screenshot, hierarchy, metadata); with DIR, also write it there",
  args: [{ name: "dir", description: "A new directory (relative to the working directory, or absolute) for the bundle; without it the bundle stays on the coordinator" }],
  options: captureOptions,
  examples: ["farm evidence capture --device SERIAL \"$PWD/evidence/step-1\"", "farm evidence capture --device SERIAL"],
  load: async () => (await import("../commands/evidence.js")).capture,
});

export const evidenceListOptions = {
  ...clientOptions,
  device: text("--device <serial>", "Only this device's bundles"),
  status: text("--status <status>", "complete, partial or failed"),
  label: text("--label <text>", "Only bundles with this label"),
};
export const pullOptions = { ...clientOptions, outputDir: outputDir("A new directory (relative to the working directory, or absolute)") };
export const verifyOptions = {};

export const videoStartOptions = {
  ...clientOptions,
  device: requiredText("--device <serial>", "Device serial, or a physical id (a unique prefix is enough, as farm devices shows it)", { env: "FARM_DEVICE" }),
  agent: text("--agent <name>", "Agent name or id, for a serial on two hosts"),
  lease: leasedDeviceOptions.lease,
  durationSeconds: text("--duration-seconds <s>", "Length of the recording, 1..180 (required)"),
  size: text("--size <WxH>", "Video size"),
  label: text("--label <text>", "A label stored in the manifest"),
  contextJson: text("--context-json <object>", "A JSON object stored in the manifest"),
  outputDir: outputDir("A new directory (relative to the working directory, or absolute) for the bundle"),
};
// A recording, not a test session (`farm session`): --session is its old spelling, still accepted.
const recordingOption = {
  recording: text("--recording <id|manifest>", "A recording id, or the manifest path (or directory) of a bundle started with DIR"),
  session: hidden(text("--session <id|manifest>", "Old spelling of --recording")),
};
export const videoSessionOptions = { ...clientOptions, ...recordingOption, device: text("--device <serial>", "Refuse unless the recording is of this device") };
export const videoInspectOptions = { ...clientOptions, ...recordingOption };
export const videoReleaseOptions = { ...clientOptions, ...recordingOption, reason: requiredText("--reason <text>", "Why the lock is released (audit-logged)") };
export const videoListOptions = { ...clientOptions, device: text("--device <serial>", "Only this device's recordings"), status: text("--status <status>", "recording, complete, …") };

export const videoGroup = group({
  name: "video",
  summary: "Managed screen recordings: start, status, stop, inspect, release, list",
  commands: [
    leaf({
      name: "start",
      summary: "Start a recording on a phone; answers once the recorder is live",
      args: [{ name: "dir", description: "A new directory (relative to the working directory, or absolute) for the bundle" }],
      options: videoStartOptions,
      examples: ["farm evidence video start --device SERIAL --duration-seconds 30 /abs/new/dir"],
      load: async () => (await import("../commands/evidence-video.js")).startVideo,
    }),
    leaf({ name: "status", summary: "Show a recording's state", options: videoSessionOptions, load: async () => (await import("../commands/evidence-video.js")).videoStatus }),
    leaf({ name: "stop", summary: "Stop a recording and wait (15 s) for its verified bundle", options: videoSessionOptions, load: async () => (await import("../commands/evidence-video.js")).stopVideo }),
    leaf({ name: "inspect", summary: "Show a recording's files, worker heartbeat, lock and remote recorder (changes nothing)", options: videoInspectOptions, load: async () => (await import("../commands/evidence-video.js")).inspectVideo }),
    leaf({ name: "release", summary: "Release the recording lock of a recording whose worker is gone (admin; after inspect)", options: videoReleaseOptions, load: async () => (await import("../commands/evidence-video.js")).releaseVideo }),
    leaf({ name: "list", summary: "List the recordings known to the coordinator", options: videoListOptions, load: async () => (await import("../commands/evidence-video.js")).listVideo }),
  ],
});

export const evidenceGroup = group({
  name: "evidence",
  summary: "Evidence bundles: capture, list, pull, verify, video",
  commands: [
    evidenceCapture,
    leaf({ name: "list", summary: "List bundles in the coordinator's evidence store", options: evidenceListOptions, load: async () => (await import("../commands/evidence.js")).listEvidence }),
    leaf({
      name: "pull",
      summary: "Copy a stored bundle into a new directory, verifying every file",
      args: [
        { name: "evidence-id", description: "The bundle's id", required: true },
        { name: "dir", description: "A new directory (relative to the working directory, or absolute)" },
      ],
      options: pullOptions,
      examples: ["farm evidence pull EVIDENCE_ID /abs/new/dir"],
      load: async () => (await import("../commands/evidence.js")).pull,
    }),
    leaf({
      name: "verify",
      summary: "Check a bundle (or a `farm session export`) offline: schema, every file's size and sha256, and that complete media decode as recorded",
      description: "Exit 0 and ok:true when every file matches its manifest; otherwise EVIDENCE_VERIFY_FAILED with every problem. " +
        "status is the bundle's own; for a session export it is complete when the session had ended before the export, and running when it was still recording: the files are sound, but steps after the export are not in it.",
      args: [{ name: "bundle-dir", description: "The bundle's or export's directory", required: true }],
      options: verifyOptions,
      settings: { kind: "none" },
      load: async () => (await import("../commands/evidence.js")).verify,
    }),
    videoGroup,
  ],
});
