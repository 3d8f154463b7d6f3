import { FsError } from "../../fs/fs-error.js";
import { toUiautomatorXml } from "../../screen/uiautomator-xml.js";
import type { UiNode } from "../../screen/ui-node.js";
import type { ShellCommand } from "../command.js";
import { pathOf } from "./file-args.js";

const DEFAULT_DUMP = "/sdcard/window_dump.xml";

/**
 * `uiautomator dump [--compressed] [FILE|/dev/tty]`: writes the focused
 * window's hierarchy and prints Android's (misspelt) confirmation.
 */
export const uiautomatorCommand: ShellCommand = async (ctx) => {
  const [sub, ...rest] = ctx.args;
  if (sub !== "dump") {
    await ctx.stderr.write(
      sub === undefined
        ? "Usage: uiautomator <subcommand> [options]\n\nAvailable subcommands:\n\nhelp: displays help message\n\nruntest: executes UI automation tests\n\ndump: creates an XML dump of current UI hierarchy\n\nevents: prints out accessibility events until terminated\n"
        : `Unknown command: ${sub}\n`,
    );
    return 1;
  }
  const file = rest.find((arg) => !arg.startsWith("--")) ?? DEFAULT_DUMP;
  const tree = ctx.device.screen.tree();
  // The uiautomator JVM and its wait for an idle UI, then the walk of the tree (latency profiles).
  const { latency } = ctx.device;
  if (!latency.instant) await latency.wait("uiDumpMs", 1, latency.profile.uiDumpMsPerNode * (tree ? countNodes(tree) : 0));
  if (!tree) {
    // What a phone with its screen off answers (the command still exits 0).
    await ctx.stderr.write("ERROR: null root node returned by UiTestAutomationBridge.\n");
    return 0;
  }
  const xml = toUiautomatorXml(tree, ctx.device.display.rotation);
  if (file === "/dev/tty" || file === "/dev/stdout") {
    await ctx.stdout.write(`${xml}\nUI hierchary dumped to: ${file}\n`);
    return 0;
  }
  try {
    ctx.device.fs.writeFile(pathOf(ctx, file), Buffer.from(xml), ctx.caller, { mode: 0o660 });
  } catch (error) {
    if (!(error instanceof FsError)) throw error;
    await ctx.stderr.write(`ERROR: could not write ${file}: ${error.message}\n`);
    return 1;
  }
  await ctx.stdout.write(`UI hierchary dumped to: ${file}\n`);
  return 0;
};

function countNodes(node: UiNode): number {
  return node.children.reduce((n, child) => n + countNodes(child), 1);
}
