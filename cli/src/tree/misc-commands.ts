import { clientOptions } from "../options/common-options.js";
import { flag, intIn, parsed, text } from "../options/index.js";
import { group, leaf } from "./spec.js";

export const activityOptions = {
  ...clientOptions,
  device: text("--device <serial>", "Only this device's actions"),
  since: text("--since <1h|iso-time>", "Only actions since then: a duration ago or an ISO time"),
  limit: { ...parsed("--limit <n>", "At most this many entries, newest first", intIn(1, 10_000)), defaultText: "200" },
};
export const activityCommand = leaf({
  name: "activity",
  summary: "Routed actions: who did what on which device, and how it ended",
  options: activityOptions,
  load: async () => (await import("../commands/activity.js")).activity,
});

export const configViewOptions = clientOptions;
export const configSetOptions = { unset: flag("--unset", "Remove the key instead") };
export const configGroup = group({
  name: "config",
  summary: "The client config file (FARM_CONFIG, else ~/.config/farm/config.json): view, set",
  commands: [
    leaf({
      name: "view",
      summary: "Show the config file and the settings in effect, with where each comes from",
      options: configViewOptions,
      load: async () => (await import("../commands/config.js")).viewConfig,
    }),
    leaf({
      name: "set",
      summary: "Set (or --unset) one key of the config file: coordinator, token, tokenFile, caFile, insecure, output",
      args: [
        { name: "key", description: "The key", required: true },
        { name: "value", description: "Its value" },
      ],
      options: configSetOptions,
      settings: { kind: "none" },
      examples: ["farm config set coordinator https://coordinator.lab:7420", "farm config set output pretty", "farm config set --unset token"],
      load: async () => (await import("../commands/config.js")).setConfig,
    }),
  ],
});

export const completionOptions = {};
export const completionGroup = group({
  name: "completion",
  summary: "Shell completion scripts: bash, zsh, fish",
  commands: (["bash", "zsh", "fish"] as const).map((shell) =>
    leaf({
      name: shell,
      summary: `Print the ${shell} completion script`,
      options: completionOptions,
      settings: { kind: "none" },
      examples: [
        shell === "bash" ? "source <(farm completion bash)    # in ~/.bashrc" : shell === "zsh" ? "source <(farm completion zsh)     # in ~/.zshrc" : "farm completion fish > ~/.config/fish/completions/farm.fish",
      ],
      load: async () => (await import("../completion/completion-command.js")).completionAction(shell),
    })
  ),
});

export const versionOptions = { ...clientOptions, timeout: { ...parsed("--timeout <ms>", "How long to wait for the coordinator's version", intIn(100, 60_000)), defaultText: "1500" } };
/** `farm version`: the old spelling of `farm --version`. */
export const versionCommand = leaf({
  name: "version",
  summary: "Print the CLI's version and the configured coordinator's",
  hidden: true,
  options: versionOptions,
  load: async () => (await import("../version/version-command.js")).versionAction,
});
