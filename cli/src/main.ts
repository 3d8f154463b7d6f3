#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Errors } from "@farm/shared/errors";
import { CliError } from "./cli-error.js";
import { FARM_VERSION } from "@farm/shared/version";
import { isGroup, type Command, type CommandNode } from "./command.js";
import { createPrinter, defaultFormat, type OutputFormat } from "./output.js";
import { configuredOutput } from "./config.js";
/**
 * Top-level commands. Each module is loaded only when its command runs, so
 * a client command does not pay for the coordinator's and agent's code
 * (SQLite, adb, image decoding) at start-up.
 */
export const commands: { name: string; summary: string; load: () => Promise<CommandNode> }[] = [
  { name: "standalone", summary: "Run coordinator and agent in one process on loopback (single machine)", load: async () => (await import("./commands/standalone.js")).standaloneCommand },
  { name: "coordinator", summary: "Run the coordinator service", load: async () => (await import("./commands/coordinator.js")).coordinatorCommand },
  { name: "agent", summary: "Run the agent for the phones on this host", load: async () => (await import("./commands/agent.js")).agentCommand },
  { name: "agents", summary: "List agents, online and offline", load: async () => (await import("./commands/agents.js")).agentsCommand },
  { name: "devices", summary: "List devices on every agent", load: async () => (await import("./commands/devices.js")).devicesCommand },
  { name: "device", summary: "Act on one device: shell, setprop, pin, ownership", load: async () => (await import("./commands/device.js")).deviceGroup },
  { name: "evidence", summary: "Evidence bundles: capture, video, list, pull, verify", load: async () => (await import("./commands/evidence.js")).evidenceGroup },
  { name: "shell", summary: "Run a shell command on a device (FARM_DEVICE by default)", load: async () => (await import("./commands/device.js")).shellCommand },
  { name: "input", summary: "Send input to a device: tap, swipe, text, key", load: async () => (await import("./commands/device.js")).inputCommand },
  { name: "logcat", summary: "Read a device's log", load: async () => (await import("./commands/device.js")).logcatCommand },
  { name: "reboot", summary: "Reboot a device", load: async () => (await import("./commands/device.js")).rebootCommand },
  { name: "screenshot", summary: "Save a verified PNG screenshot of a device", load: async () => (await import("./commands/device.js")).screenshotCommand },
  { name: "install", summary: "Install an APK on a device", load: async () => (await import("./commands/device.js")).installCommand },
  { name: "app", summary: "App SDK and WebDriverAgent endpoints on a device", load: async () => (await import("./commands/app.js")).appGroup },
  { name: "lease", summary: "Leases: acquire, renew, release, list, run", load: async () => (await import("./commands/lease.js")).leaseGroup },
  { name: "activity", summary: "Routed actions: who did what on which device", load: async () => (await import("./commands/activity.js")).activityCommand },
  { name: "token", summary: "Manage agent and user tokens (admin)", load: async () => (await import("./commands/token.js")).tokenGroup },
  { name: "tls", summary: "TLS helpers: a self-signed lab CA and coordinator certificate", load: async () => (await import("./commands/tls.js")).tlsGroup },
];

function rootHelp(): string {
  const lines = commands.map((c) => `  ${c.name.padEnd(12)} ${c.summary}`);
  return [
    `farm ${FARM_VERSION} — a device farm for mobile apps`,
    "",
    "Usage: farm <command> [flags]",
    "",
    "Commands:",
    ...lines,
    "",
    "Flags: --output json|pretty (every command); clients also --coordinator URL, --token-file FILE, --timeout MS",
    "Environment: FARM_COORDINATOR, FARM_TOKEN, FARM_HOME, FARM_CONFIG",
    "Run `farm <command> --help` for a command's flags.",
  ].join("\n");
}

function commandHelp(c: Command, path: string): string {
  const flags = Object.entries(c.options).map(([name, o]) => `  --${name}${o.type === "string" ? " VALUE" : ""}`);
  return [`${path}: ${c.summary}`, "", `Usage: ${c.usage}`, "", "Flags:", ...flags].join("\n");
}

function groupHelp(path: string, cmds: CommandNode[], summary: string): string {
  return [`${path}: ${summary}`, "", `Usage: ${path} <subcommand> [flags]`, "", "Subcommands:", ...cmds.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`)].join("\n");
}

/**
 * Takes `--output json|pretty` out of argv (every command accepts it) and
 * picks the format before parsing anything else, so even flag errors honour
 * it: flag > FARM_OUTPUT > config file > json unless stdout is a terminal.
 */
function takeOutputFormat(argv: string[], env: NodeJS.ProcessEnv): { format: OutputFormat; rest: string[]; bad?: string; repeated?: boolean } {
  const rest: string[] = [];
  let flag: string | undefined;
  let repeated = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    const value = a === "--output" ? argv[i + 1] : a.startsWith("--output=") ? a.slice("--output=".length) : undefined;
    // Other values stay for the command (`farm screenshot --output shot.png`);
    // commands without such a flag reject them as an unknown option.
    if (value === "json" || value === "pretty") {
      // Like every single-value flag, given twice it is refused (not "last
      // wins"); the refusal is printed in the first format asked for.
      if (flag !== undefined) repeated = true;
      else flag = value;
      if (a === "--output") i++;
      continue;
    }
    rest.push(a);
  }
  const v = flag ?? env["FARM_OUTPUT"] ?? configuredOutput(env);
  if (v === undefined) return { format: defaultFormat(), rest, repeated };
  if (v === "json" || v === "pretty") return { format: v, rest, repeated };
  return { format: "json", rest, bad: v, repeated };
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const output = takeOutputFormat(argv, env);
  const printer = createPrinter(output.format);
  argv = output.rest;
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    if (output.bad !== undefined) {
      throw new CliError(Errors.INVALID_ARGUMENT, `--output must be json or pretty, got "${output.bad}"`, "output");
    }
    if (output.repeated) throw new CliError(Errors.INVALID_ARGUMENT, "--output was given more than once; give it once", "output");
    const [first, ...rest] = argv;
    if (first === undefined || first === "--help" || first === "-h" || first === "help") {
      process.stdout.write(rootHelp() + "\n");
      return first === undefined ? 1 : 0;
    }
    if (first === "--version" || first === "-v" || first === "version") {
      printer.result({ version: FARM_VERSION }, () => `farm ${FARM_VERSION}`);
      return 0;
    }
    const entry = commands.find((c) => c.name === first);
    let node: CommandNode | undefined = await entry?.load();
    if (!node) throw new CliError(Errors.INVALID_ARGUMENT, `unknown command "${first}"; see \`farm --help\``, "command");
    let args = rest;
    let path = `farm ${node.name}`;
    while (isGroup(node)) {
      const [sub, ...subArgs]: string[] = args;
      if (sub === undefined || sub === "--help" || sub === "-h") {
        process.stdout.write(groupHelp(path, node.commands, node.summary) + "\n");
        return sub === undefined ? 1 : 0;
      }
      const found: CommandNode | undefined = node.commands.find((c) => c.name === sub);
      if (!found) throw new CliError(Errors.INVALID_ARGUMENT, `unknown command "${path} ${sub}"; see \`${path} --help\``, "command");
      node = found;
      args = subArgs;
      path += ` ${sub}`;
    }
    const command: Command = node;
    // Arguments after "--" belong to the device command, not to farm.
    const own = args.includes("--") ? args.slice(0, args.indexOf("--")) : args;
    if (own.includes("--help") || own.includes("-h")) {
      process.stdout.write(commandHelp(command, path) + "\n");
      return 0;
    }
    return await command.run({ args, env, printer, stopSignal: stop.signal });
  } catch (err) {
    printer.failure(err);
    return 1;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

const invokedDirectly = process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  const code = await main(process.argv.slice(2));
  // Flush stdout before exiting so piped JSON is never cut short.
  process.stdout.write("", () => process.exit(code));
}
