import { Errors, type FarmErrorSpec } from "@farm/shared/errors";
import { AdbServiceError as AdbShellError, type ServiceErrorCode } from "../adb/adb-service.js";
import { DispatchFailure } from "../ownership/device-ownership.js";

/** The error a failed adb service call reports to the caller. */
const errorFor: Record<ServiceErrorCode, FarmErrorSpec> = {
  DEADLINE_EXCEEDED: Errors.COMMAND_TIMEOUT,
  DEVICE_OFFLINE: Errors.DEVICE_OFFLINE,
  ADB_CONNECTION_LOST: Errors.ADB_CONNECTION_LOST,
  ADB_REFUSED: Errors.ADB_REFUSED,
  OUTPUT_TOO_LARGE: Errors.OUTPUT_TOO_LARGE,
};

/** Maps how far a shell call got onto what is known about its dispatch. */
export function toDispatchFailure(err: unknown): DispatchFailure {
  if (!(err instanceof AdbShellError)) return new DispatchFailure((err as Error).message, null, Errors.INTERNAL);
  const dispatched = err.phase === "before" ? false : err.phase === "sent" ? null : true;
  return new DispatchFailure(err.message, dispatched, errorFor[err.code]);
}
