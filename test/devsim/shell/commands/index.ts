import type { CommandTable, ShellCommand } from '../command.js';
import { exitCommand, falseCommand, sleepCommand, trueCommand } from './builtins.js';
import { catCommand } from './cat.js';
import { echoCommand } from './echo.js';
import { getpropCommand, setpropCommand } from './properties.js';

/**
 * Commands the simulated shell knows, by name. Add a command by writing a
 * ShellCommand in its own file and listing it here.
 */
export const DEFAULT_COMMANDS: CommandTable = new Map<string, ShellCommand>([
  [':', trueCommand],
  ['true', trueCommand],
  ['false', falseCommand],
  ['exit', exitCommand],
  ['echo', echoCommand],
  ['sleep', sleepCommand],
  ['getprop', getpropCommand],
  ['setprop', setpropCommand],
  ['cat', catCommand],
]);
