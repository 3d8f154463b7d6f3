import { Errors, farmError, NOT_DISPATCHED } from "./errors.js";

/**
 * A shell command's length in UTF-8 bytes. adb carries it in a service
 * request whose length is four hex digits (at most 65535 bytes, with the
 * `shell,v2,raw:` prefix), so anything near that would fail on the host.
 */
export const SHELL_COMMAND_MAX_BYTES = 32 * 1024;

/** A system property value: one line of at most this many characters. */
export const PROP_VALUE_MAX_CHARS = 4096;

/**
 * Argument caps of device commands, checked by the coordinator before it
 * routes a call and again by the agent (which may be reached otherwise).
 * Each refusal names its field and says nothing reached the device.
 */
export function checkShellCommand(command: string): void {
  if (command.trim() === "") throw farmError(Errors.INVALID_ARGUMENT, "command is empty", "command", NOT_DISPATCHED);
  const bytes = Buffer.byteLength(command, "utf8");
  if (bytes > SHELL_COMMAND_MAX_BYTES) {
    throw farmError(Errors.INVALID_ARGUMENT, `the command is ${bytes} bytes; at most ${SHELL_COMMAND_MAX_BYTES} are allowed`, "command", NOT_DISPATCHED);
  }
}

export function checkPropValue(value: string): void {
  if (/[\n\0]/.test(value) || value.length > PROP_VALUE_MAX_CHARS) {
    throw farmError(Errors.INVALID_ARGUMENT, `property value must be one line of at most ${PROP_VALUE_MAX_CHARS} characters`, "value", NOT_DISPATCHED);
  }
}
