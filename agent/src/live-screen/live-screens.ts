import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import type { Logger } from "@farm/shared/log";
import { AgentScreenService, ServeScreenRequestSchema, type ServeScreenRequest, type ServeScreenResponse } from "@farm/shared/gen/farm/v1/agent_screen_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { PhoneStreams } from "../phone-streams/phone-streams.js";
import { runScreen } from "./screen-source.js";

/** The coordinator's AgentScreenService.ServeScreen (tests stand in for it). */
export type ServeScreen = (requests: AsyncIterable<ServeScreenRequest>, signal: AbortSignal) => AsyncIterable<ServeScreenResponse>;

export function serveScreenOver(transport: Transport): ServeScreen {
  const client = createClient(AgentScreenService, transport);
  return (requests, signal) => client.serveScreen(requests, { signal });
}

/** Live screens one agent streams at once (one per phone is what a coordinator asks for). */
export const MAX_LIVE_SCREENS = 32;
/** Events waiting for the coordinator before the phone's stream is paused. */
const QUEUED_EVENTS = 8;

/**
 * The live screens this agent streams, by stream id: each reads its phone's
 * screen and sends its events on its own ServeScreen call
 * (phone-streams.ts: until the coordinator ends the call, the agent stops,
 * or the phone goes away).
 */
export class LiveScreens extends PhoneStreams<ServeScreenRequest> {
  constructor(opts: { adb: AdbServerAddress; serve: ServeScreen; log: Logger }) {
    super({
      noun: "live screen",
      max: MAX_LIVE_SCREENS,
      queued: QUEUED_EVENTS,
      serve: opts.serve,
      log: opts.log,
      opening: (streamId) => create(ServeScreenRequestSchema, { kind: { case: "streamId", value: streamId } }),
      produce: (serial, send, signal) => runScreen({ adb: opts.adb, serial, signal, log: opts.log, emit: (event) => send(create(ServeScreenRequestSchema, { kind: { case: "event", value: event } })) }),
    });
  }
}
