import { deviceOptions } from "../options/common-options.js";
import { intIn, parsed, text } from "../options/index.js";
import { group, leaf } from "./spec.js";

export const endpointOptions = {
  ...deviceOptions,
  package: text("--package <pkg>", "Android app package"),
  bundleId: text("--bundle-id <id>", "iOS app bundle id"),
  wdaRunner: text("--wda-runner <runner-id>", "WebDriverAgent runner bundle id (iOS)"),
};
export const removeForwardOptions = { ...deviceOptions, port: parsed("--port <n>", "The forwarded local port (required)", intIn(1, 65_535)) };

export const appGroup = group({
  name: "app",
  summary: "App SDK and WebDriverAgent endpoints: endpoint, remove-forward",
  commands: [
    leaf({
      name: "endpoint",
      summary: "Find and verify an app's SDK endpoint (or WebDriverAgent on iOS) on a device",
      options: endpointOptions,
      examples: ["farm app endpoint --device SERIAL --package com.example.app", "farm app endpoint --device IOS_ID --wda-runner dev.farm.wda.xctrunner"],
      load: async () => (await import("../commands/app.js")).endpoint,
    }),
    leaf({ name: "remove-forward", summary: "Remove an adb forward on the agent's host, checking it belongs to the device", options: removeForwardOptions, load: async () => (await import("../commands/app.js")).removeForward }),
  ],
});
