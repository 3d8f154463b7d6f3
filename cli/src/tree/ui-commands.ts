import { deviceOptions } from "../options/common-options.js";
import { text } from "../options/index.js";
import { group, leaf } from "./spec.js";

/** `farm ui …`: what is on a device's screen, as elements. */

export const uiTreeOptions = {
  ...deviceOptions,
  appPackage: text("--app-package <pkg>", "Read the tree from this app's SDK (its own view tree) instead of UIAutomator"),
};
export const uiTree = leaf({
  name: "tree",
  summary: "Show the screen's UI tree: type, text, id, description, bounds, flags (a read)",
  description: "JSON output (-o json) is the farm.v1.GetUiTreeResponse message: source, nodeCount and the roots (one per window), each element with its children.",
  options: uiTreeOptions,
  examples: ["farm ui tree --device SERIAL", "farm ui tree --device SERIAL --app-package com.example.app -o json"],
  load: async () => (await import("../commands/ui.js")).tree,
});

export const uiGroup = group({
  name: "ui",
  summary: "A device's screen as UI elements: tree (tap one with farm input tap --id|--text|--desc)",
  commands: [uiTree],
});
