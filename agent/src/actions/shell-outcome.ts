import { ErrorCodes } from "@farm/shared/errors";
import { AdbServiceError as AdbShellError } from "../adb-service.js";
import { DispatchFailure } from "../device-ownership.js";

/** Maps how far a shell call got onto what is known about its dispatch. */
export function toDispatchFailure(err: unknown): DispatchFailure {
  if (!(err instanceof AdbShellError)) return new DispatchFailure((err as Error).message, null, ErrorCodes.internal);
  const dispatched = err.phase === "before" ? false : err.phase === "sent" ? null : true;
  const code = err.code === "DEADLINE_EXCEEDED" ? ErrorCodes.commandTimeout : err.code === "DEVICE_OFFLINE" ? ErrorCodes.deviceOffline : err.code;
  return new DispatchFailure(err.message, dispatched, code);
}
