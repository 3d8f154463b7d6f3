import type { deviceListOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";
import { attemptDevices } from "./devices-attempt.js";
import { takeRecordedCall } from "./recorded-call.js";

/**
 * `farm devices` as one request (devices-attempt.ts), when the listing is
 * one plain page: the same table or JSON as commands/devices.ts, whose full
 * path runs instead for anything else (a second page, an error, an answer
 * the own reader leaves to protobuf-es). ListDevices only reads, so asking
 * again that way changes nothing; what is printed is the full path's own.
 */
export const hotDevices: Action<typeof deviceListOptions> = async (input) => {
  const attempt = await attemptDevices(input, takeRecordedCall("devices"));
  if (attempt.kind === "done") return attempt.code;
  return (await import("../commands/devices.js")).listDevices(input);
};
