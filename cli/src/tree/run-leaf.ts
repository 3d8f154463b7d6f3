import { configFilePath, readConfigFile } from "@farm/client/config";
import { resolveOptions, type Layers } from "../options/resolve.js";
import { loadServiceConfig } from "../service-config.js";
import type { Runtime } from "./build.js";
import type { AnyLeaf, CommandContext } from "./spec.js";

/** What the command line gave a leaf, by option key: text, every text of a list, or true for a switch. */
export type LeafFlags = Record<string, string | string[] | true | undefined>;

/**
 * Runs a parsed leaf: resolves its options (flag > env > config file >
 * default), then loads and runs its action. Both parsers end here, commander
 * (tree/build.ts) and the hot path's (tree/hot-path.ts), so a command does
 * the same whichever parsed it. No commander in this module: the hot path
 * must not load it.
 */
export async function runLeaf(spec: AnyLeaf, rt: Runtime, path: string, flags: LeafFlags, positionals: string[]): Promise<void> {
  const configPath = configFilePath(rt.env);
  const ctx: CommandContext = {
    env: rt.env,
    printer: rt.printer,
    format: rt.format,
    formatChosen: rt.formatChosen === true,
    formatSource: rt.formatSource,
    stopSignal: rt.stopSignal,
    commandTree: rt.commandTree,
    writeOut: rt.writeOut,
    writeErr: rt.writeErr,
    connections: rt.connections,
    stderrIsTty: rt.stderrIsTty,
    entry: rt.entry,
    configPath,
    configFile: {},
  };
  const layers: Layers = { flags, env: rt.env, file: {} };
  const settings = spec.settings ?? { kind: "client" };
  if (settings.kind === "client") {
    ctx.configFile = readConfigFile(configPath);
    Object.assign(layers, { file: ctx.configFile, fileName: configPath });
  } else if (settings.kind === "service") {
    // A service's --config FILE: the flag, else its environment variable.
    const path = typeof flags[settings.option] === "string" ? (flags[settings.option] as string) : rt.env[settings.env] || undefined;
    Object.assign(layers, { file: loadServiceConfig(path, settings.keys), fileName: path });
  }
  const { values, sources } = resolveOptions(spec.options, layers);
  if (rt.intercept) {
    rt.intercept({ path, spec, opts: values, sources, args: positionals });
    rt.exitCode = 0;
    return;
  }
  const action = await spec.load();
  rt.exitCode = await action({ opts: values, sources, args: positionals, ctx });
}
