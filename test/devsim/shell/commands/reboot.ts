import type { ShellCommand } from "../command.js";

/** `reboot [TARGET]`: the connection drops and the phone comes back with a new boot id. */
export const rebootCommand: ShellCommand = (ctx) => {
  // Let the shell's output flush before the transport goes down.
  setTimeout(() => ctx.device.hooks.reboot(), 50);
  // Like the real command, it never returns: the session ends with the connection.
  return new Promise<number>((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true }));
};
