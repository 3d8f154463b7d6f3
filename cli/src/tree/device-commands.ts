import { clientOptions, deviceOptions } from "../options/common-options.js";
import { hidden, intIn, parsed, requiredText, text } from "../options/index.js";
import { group, leaf } from "./spec.js";

/** `farm device …`: one device at a time. The common verbs are also at the top level (tree/shortcuts.ts). */

export const deviceListOptions = {
  ...clientOptions,
  agent: text("--agent <name>", "Only devices of this agent (name or id)"),
  state: text("--state <state>", "Only devices in this state (device, offline, unauthorized, quarantined, …)"),
};
export const deviceList = leaf({
  name: "list",
  summary: "List devices on every agent (wide: also manufacturer, ABI, boot id, pin, last update, quarantine reason)",
  options: deviceListOptions,
  examples: ["farm device list", "farm devices --state device -o wide"],
  // One request without Connect or protobuf-es for a one-page listing; commands/devices.js otherwise (hot/hot-devices.ts).
  load: async () => (await import("../hot/hot-devices.js")).hotDevices,
});

export const deviceShowOptions = { ...clientOptions, agent: text("--agent <name>", "The agent, for a serial on two hosts") };
export const deviceShow = leaf({
  name: "show",
  summary: "Show one device's record: state, properties, agent, labels",
  args: [{ name: "serial", description: "Device serial", required: true }],
  options: deviceShowOptions,
  load: async () => (await import("../commands/device-show.js")).showDevice,
});

export const shellOptions = deviceOptions;
export const deviceShell = leaf({
  name: "shell",
  summary: "Run a shell command on a device (a journaled mutation); without a command, an interactive terminal",
  args: [{ name: "command", description: "The command and its words (after --)", variadic: true }],
  options: shellOptions,
  mutation: true,
  examples: ["farm shell --device SERIAL -- getprop ro.product.model", "farm shell --device SERIAL"],
  // One request without Connect or protobuf-es for a plain `farm shell -- …`; commands/device.js's shell otherwise (hot/hot-shell.ts).
  load: async () => (await import("../hot/hot-shell.js")).hotShell,
});

export const inputOptions = {
  ...deviceOptions,
  id: text("--id <resource-id>", "tap: the element with exactly this resource id (com.example:id/next), instead of X Y"),
  text: text("--text <text>", "tap: the element whose whole text is exactly this, instead of X Y"),
  desc: text("--desc <content-desc>", "tap: the element with exactly this content description, instead of X Y"),
};
export const deviceInput = leaf({
  name: "input",
  summary: "Send input: tap X Y | tap --id ID|--text TEXT|--desc DESC | swipe X1 Y1 X2 Y2 [MS] | text STRING | key CODE",
  description: "A tap by element reads the screen's UI tree (UIAutomator) first and taps the centre of the one element that matches; " +
    "no match is ELEMENT_NOT_FOUND, several are ELEMENT_AMBIGUOUS (the message lists them), and neither sends anything. " +
    "Zero-size and off-screen elements never match. `farm ui tree` shows what a selector can name.",
  args: [
    { name: "kind", description: "tap, swipe, text or key", required: true },
    { name: "values", description: "Coordinates, text or key code", variadic: true },
  ],
  options: inputOptions,
  mutation: true,
  examples: ["farm input --device SERIAL tap 540 1200", "farm input --device SERIAL tap --text \"Sign in\"", "farm input tap --id com.example.app:id/next", "farm input key KEYCODE_HOME"],
  load: async () => (await import("../commands/ui.js")).input,
});

export const screenshotOptions = {
  ...deviceOptions,
  outputFile: hidden(text("--output <file>", "Where to write the PNG (old spelling of FILE)")),
};
export const deviceScreenshot = leaf({
  name: "screenshot",
  summary: "Save a verified PNG screenshot of a device (a read)",
  args: [{ name: "file", description: "A new PNG file" }],
  options: screenshotOptions,
  examples: ["farm screenshot --device SERIAL shot.png"],
  load: async () => (await import("../commands/device.js")).screenshot,
});

export const installOptions = deviceOptions;
export const deviceInstall = leaf({
  name: "install",
  summary: "Install an APK on a device (streamed upload; a journaled mutation)",
  args: [{ name: "apk", description: "The APK file", required: true }],
  options: installOptions,
  mutation: true,
  load: async () => (await import("../commands/device.js")).install,
});

export const logcatOptions = {
  ...deviceOptions,
  lines: parsed("--lines <n>", "The last N lines", intIn(1, 10_000)),
  since: text("--since <time>", "Lines since this time ('MM-DD HH:MM:SS.mmm')"),
};
export const deviceLogcat = leaf({
  name: "logcat",
  summary: "Read a device's log (the last lines, or since a time)",
  options: logcatOptions,
  load: async () => (await import("../commands/device.js")).logcat,
});

export const rebootOptions = deviceOptions;
export const deviceReboot = leaf({
  name: "reboot",
  summary: "Reboot a device (a journaled mutation; proven later by a new boot id)",
  options: rebootOptions,
  mutation: true,
  load: async () => (await import("../commands/device.js")).reboot,
});

export const propsOptions = deviceOptions;
export const deviceProps = leaf({
  name: "props",
  summary: "Show a device's system properties (a read)",
  options: propsOptions,
  load: async () => (await import("../commands/device.js")).props,
});

export const setpropOptions = deviceOptions;
export const deviceSetprop = leaf({
  name: "setprop",
  summary: "Set a system property on a device (a journaled mutation)",
  args: [
    { name: "key", description: "Property name", required: true },
    { name: "value", description: "Its new value", required: true },
  ],
  options: setpropOptions,
  mutation: true,
  load: async () => (await import("../commands/device.js")).setprop,
});

export const pinOptions = { ...deviceOptions, label: requiredText("--label <label>", "Pin label ('' removes the pin)") };
export const devicePin = leaf({
  name: "pin",
  summary: "Pin a phone apart from others with the same identity (admin)",
  options: pinOptions,
  load: async () => (await import("../commands/device.js")).pin,
});

export const labelSetOptions = clientOptions;
export const labelRmOptions = clientOptions;
export const labelListOptions = clientOptions;
export const deviceLabel = group({
  name: "label",
  summary: "Device labels (they belong to the physical device): set, rm, list",
  commands: [
    leaf({
      name: "set",
      summary: "Set labels on a device",
      args: [
        { name: "serial", description: "Device serial", required: true },
        { name: "label", description: "key=value labels", required: true, variadic: true },
      ],
      options: labelSetOptions,
      load: async () => (await import("../commands/label.js")).setLabels,
    }),
    leaf({
      name: "rm",
      summary: "Remove a label from a device",
      args: [
        { name: "serial", description: "Device serial", required: true },
        { name: "key", description: "Label key", required: true },
      ],
      options: labelRmOptions,
      load: async () => (await import("../commands/label.js")).removeLabel,
    }),
    leaf({
      name: "list",
      summary: "Labels of every labelled device, by physical id",
      options: labelListOptions,
      load: async () => (await import("../commands/label.js")).listLabels,
    }),
  ],
});

export const ownershipOptions = deviceOptions;
export const receiptOptions = { ...deviceOptions, actionId: requiredText("--action-id <id>", "The action's id") };
export const abandonOptions = { ...receiptOptions, reason: requiredText("--reason <text>", "Why the unknown outcome is accepted (audit-logged)") };
export const deviceOwnership = group({
  name: "ownership",
  summary: "Device ownership: status, reconcile, receipt, abandon",
  commands: [
    leaf({ name: "status", summary: "Show who holds a device and its unresolved actions (exit 1 if any)", options: ownershipOptions, load: async () => (await import("../commands/device.js")).ownershipStatus }),
    leaf({ name: "reconcile", summary: "Settle unresolved actions that can be proven; never replays them", options: ownershipOptions, load: async () => (await import("../commands/device.js")).reconcile }),
    leaf({ name: "receipt", summary: "Read a retained action record", options: receiptOptions, load: async () => (await import("../commands/device.js")).receipt }),
    leaf({
      name: "abandon",
      summary: "Accept an unknown outcome (admin; the lease holder: a remote adb tunnel's raw-adb action only; audit-logged, never 'settled')",
      options: abandonOptions,
      load: async () => (await import("../commands/device.js")).abandon,
    }),
  ],
});

export const aliasOptions = {
  ...clientOptions,
  device: requiredText("--device <serial>", "The quarantined serial"),
  agent: requiredText("--agent <name>", "The agent claiming it"),
};
export const deviceAlias = group({
  name: "alias",
  summary: "Accept or reject a second agent's claim on a phone (quarantined serials)",
  commands: [
    leaf({ name: "accept", summary: "Let an agent use a quarantined serial: one phone legitimately on two hosts (admin)", options: aliasOptions, load: async () => (await import("../commands/device-alias.js")).accept }),
    leaf({ name: "reject", summary: "Keep an agent's quarantined serial out of leases and routing for good (admin)", options: aliasOptions, load: async () => (await import("../commands/device-alias.js")).reject }),
  ],
});

export const clearAttentionOptions = {
  ...clientOptions,
  device: requiredText("--device <serial|physical-id>", "The phone marked needs-attention"),
};
export const deviceClearAttention = leaf({
  name: "clear-attention",
  summary: "Put a phone whose cleanup failed (needs-attention) back in the pool, once you have seen to it (admin)",
  options: clearAttentionOptions,
  examples: ["farm device clear-attention --device emulator-5554"],
  load: async () => (await import("../commands/device-attention.js")).clearAttention,
});

export const deviceGroup = group({
  name: "device",
  summary: "Act on one device: list, show, shell, input, screenshot, install, logcat, reboot, props, setprop, pin, label, ownership, alias, clear-attention",
  commands: [deviceList, deviceShow, deviceShell, deviceInput, deviceScreenshot, deviceInstall, deviceLogcat, deviceReboot, deviceProps, deviceSetprop, devicePin, deviceLabel, deviceOwnership, deviceAlias, deviceClearAttention],
});
