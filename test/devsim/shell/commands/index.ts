import type { CommandTable, ShellCommand } from "../command.js";
import { amCommand } from "./am.js";
import { monkeyCommand } from "./monkey.js";
import { exitCommand, falseCommand, sleepCommand, trueCommand } from "./builtins.js";
import { catCommand } from "./cat.js";
import { dumpsysCommand } from "./dumpsys.js";
import { echoCommand } from "./echo.js";
import { grepCommand } from "./grep.js";
import { inputCommand } from "./input.js";
import { killCommand } from "./kill.js";
import { lsCommand } from "./ls.js";
import { mkdirCommand } from "./mkdir.js";
import { pmCommand } from "./pm.js";
import { getpropCommand, setpropCommand } from "./properties.js";
import { pidofCommand, psCommand } from "./ps.js";
import { pwdCommand } from "./pwd.js";
import { rmCommand, rmdirCommand } from "./rm.js";
import { runAsCommand } from "./run-as.js";
import { screencapCommand } from "./screencap.js";
import { testCommand } from "./test.js";
import { settingsCommand } from "./settings.js";
import { sha256sumCommand } from "./sha256sum.js";
import { shCommand } from "./sh.js";
import { uiautomatorCommand } from "./uiautomator.js";
import { wmCommand } from "./wm.js";
import { rebootCommand } from "./reboot.js";
import { headCommand, tailCommand } from "./head-tail.js";
import { screenrecordCommand } from "./screenrecord.js";
import { logcatCommand } from "./logcat.js";
import { logCommand } from "./log.js";
import { idCommand, whoamiCommand } from "./id.js";
import { sttyCommand } from "./stty.js";
import { nohupCommand } from "./nohup.js";
import { mvCommand } from "./mv.js";

/**
 * Commands the simulated shell knows, by name. Add a command by writing a
 * ShellCommand in its own file and listing it here.
 */
export const DEFAULT_COMMANDS: CommandTable = new Map<string, ShellCommand>([
  [":", trueCommand],
  ["true", trueCommand],
  ["false", falseCommand],
  ["exit", exitCommand],
  ["echo", echoCommand],
  ["test", testCommand],
  ["[", testCommand],
  ["stty", sttyCommand],
  ["sleep", sleepCommand],
  ["getprop", getpropCommand],
  ["setprop", setpropCommand],
  ["cat", catCommand],
  ["ls", lsCommand],
  ["mkdir", mkdirCommand],
  ["rm", rmCommand],
  ["mv", mvCommand],
  ["nohup", nohupCommand],
  ["rmdir", rmdirCommand],
  ["sha256sum", sha256sumCommand],
  ["pwd", pwdCommand],
  ["sh", shCommand],
  ["grep", grepCommand],
  ["screencap", screencapCommand],
  ["uiautomator", uiautomatorCommand],
  ["wm", wmCommand],
  ["input", inputCommand],
  ["dumpsys", dumpsysCommand],
  ["am", amCommand],
  ["monkey", monkeyCommand],
  ["pm", pmCommand],
  ["cmd", (ctx) => (ctx.args[0] === "package" ? pmCommand({ ...ctx, args: ctx.args.slice(1) }) : ctx.args[0] === "activity" ? amCommand({ ...ctx, args: ctx.args.slice(1) }) : 1)],
  ["settings", settingsCommand],
  ["ps", psCommand],
  ["pidof", pidofCommand],
  ["log", logCommand],
  ["kill", killCommand],
  ["run-as", runAsCommand],
  ["reboot", rebootCommand],
  ["head", headCommand],
  ["tail", tailCommand],
  ["screenrecord", screenrecordCommand],
  ["logcat", logcatCommand],
  ["id", idCommand],
  ["whoami", whoamiCommand],
]);
