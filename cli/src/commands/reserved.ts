import { CliError } from "../cli-error.js";
import { Errors } from "@farm/shared/error-codes";
import type { sessionOptions } from "../tree/misc-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm session`: the name is kept for device sessions, which do not exist yet. */
export const reserved: Action<typeof sessionOptions> = async () => {
  throw new CliError(Errors.NOT_IMPLEMENTED, "farm session is reserved for device sessions and does nothing yet");
};
