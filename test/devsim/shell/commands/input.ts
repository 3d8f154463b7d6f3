import { parseKeycode } from "../../screen/keycodes.js";
import type { ShellCommand } from "../command.js";

const USAGE =
  "Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n\nThe commands and default sources are:\n      text <string> (Default: touchscreen)\n      keyevent [--longpress|--doubletap] <key code number or name> ... (Default: keyboard)\n      tap <x> <y> (Default: touchscreen)\n      swipe <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n";
const SOURCES = new Set(["touchscreen", "keyboard", "mouse", "touchpad", "gamepad", "stylus", "dpad", "trackball", "joystick", "touchnavigation", "keyboard"]);

/** `input tap|swipe|text|keyevent`: drives the screen model. */
export const inputCommand: ShellCommand = async (ctx) => {
  const args = ctx.args.filter((arg, index, all) => !SOURCES.has(arg) && arg !== "-d" && all[index - 1] !== "-d");
  const [sub, ...rest] = args;
  const screen = ctx.device.screen;
  const numbers = rest.map(Number);
  const bad = async () => {
    await ctx.stderr.write(`Error: Invalid arguments for command: ${sub ?? ""}\n${USAGE}`);
    return 1;
  };
  switch (sub) {
    case "tap":
      if (rest.length !== 2 || numbers.some(Number.isNaN)) return bad();
      screen.tap(numbers[0]!, numbers[1]!);
      return 0;
    case "swipe":
    case "draganddrop":
      if (rest.length < 4 || numbers.some(Number.isNaN)) return bad();
      screen.swipe(numbers[0]!, numbers[1]!, numbers[2]!, numbers[3]!);
      return 0;
    case "text":
      if (rest.length === 0) return bad();
      screen.text(rest.join(" "));
      return 0;
    case "keyevent": {
      const codes = rest.filter((arg) => !arg.startsWith("--")).map(parseKeycode);
      if (codes.length === 0 || codes.some((code) => code === undefined)) return bad();
      for (const code of codes) screen.key(code!);
      return 0;
    }
    default:
      await ctx.stderr.write(sub === undefined ? USAGE : `Error: Unknown command: ${sub}\n${USAGE}`);
      return 1;
  }
};
