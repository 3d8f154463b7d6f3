/**
 * `mobile: shell`'s command and arguments as one line for the phone's sh:
 * the command as given (it may be a pipeline, as Appium passes it), each
 * argument single-quoted unless it is plainly safe.
 */
export function shellCommandLine(command: string, args: readonly string[]): string {
  return [command, ...args.map(quote)].join(" ");
}

function quote(arg: string): string {
  if (/^[\w@%+=:,./-]+$/.test(arg)) return arg;
  return `'${arg.replace(/'/g, "'\\''")}'`;
}
