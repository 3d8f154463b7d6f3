import { agentList } from "./agent-commands.js";
import { deviceInput, deviceInstall, deviceList, deviceLogcat, deviceReboot, deviceScreenshot, deviceShell } from "./device-commands.js";
import { shortcut, type NodeSpec } from "./spec.js";

/**
 * The common verbs at the top level, generated from their nested
 * definitions. A module of its own, without commander: the hot path
 * (hot-path.ts) parses some of them without loading the tree.
 */
export const shortcuts: readonly NodeSpec[] = [
  shortcut(deviceShell, "device shell"),
  shortcut(deviceList, "device list", "devices"),
  shortcut(agentList, "agent list", "agents"),
  shortcut(deviceInput, "device input"),
  shortcut(deviceLogcat, "device logcat"),
  shortcut(deviceReboot, "device reboot"),
  shortcut(deviceScreenshot, "device screenshot"),
  shortcut(deviceInstall, "device install"),
];
